/* fuzz_profile.c: libFuzzer entry point for the profile loader. Any input must be either
 * rejected with a message or accepted as a profile that validates and survives
 * to_json -> from_json unchanged; anything else (crash, leak, UB, mismatch) is a finding. */
#include <stdint.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plumb_err err;
    cJSON *root = json_parse_text("fuzz.json", (const char *)data, size, &err);
    if (!root) return 0;
    profile *p = profile_from_json(root, "fuzz.json", &err);
    cJSON_Delete(root);
    if (!p) {
        if (!err.msg[0]) abort(); /* a rejection must say why */
        return 0;
    }
    if (profile_validate(p, "fuzz.json", &err)) abort();
    cJSON *j = profile_to_json(p);
    if (!j) abort();
    profile *b = profile_from_json(j, "again.json", &err);
    cJSON_Delete(j);
    if (!b || !profile_equal(p, b)) abort(); /* saved form must reload identically */
    profile *k = profile_clone(p);
    if (!k || !profile_equal(p, k)) abort();
    profile_free(k);
    profile_free(b);
    profile_free(p);
    return 0;
}
