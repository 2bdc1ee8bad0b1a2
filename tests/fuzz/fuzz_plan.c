/* fuzz_plan.c: libFuzzer entry point for the plan loader (with embedded profile and cluster).
 * Any input must be either rejected with a message or accepted as a plan that validates and
 * survives to_json -> from_json unchanged. Inputs naming the profile or cluster by an absolute
 * path are skipped (they would read arbitrary files such as /dev/zero); relative paths resolve
 * under a folder that does not exist, so they exercise the error path only. */
#include <stdint.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/plan.h"

#define FUZZ_FILE "/nonexistent-plumb-fuzz/plan.json"

static int absolute_ref(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(v) && v->valuestring[0] == '/';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plumb_err err;
    cJSON *root = json_parse_text(FUZZ_FILE, (const char *)data, size, &err);
    if (!root) return 0;
    if (absolute_ref(root, "profile") || absolute_ref(root, "cluster")) {
        cJSON_Delete(root);
        return 0;
    }
    plan *pl = plan_from_json(root, FUZZ_FILE, &err);
    cJSON_Delete(root);
    if (!pl) {
        if (!err.msg[0]) abort(); /* a rejection must say why */
        return 0;
    }
    if (plan_validate(pl, FUZZ_FILE, &err)) abort();
    cJSON *j = plan_to_json(pl);
    if (!j) abort();
    plan *b = plan_from_json(j, "again.json", &err);
    cJSON_Delete(j);
    if (!b || !plan_equal(pl, b)) abort(); /* saved form must reload identically */
    plan *k = plan_clone(pl);
    if (!k || !plan_equal(pl, k)) abort();
    if (plan_minibatch(pl) != pl->microbatch_size * pl->microbatches) abort();
    plan_free(k);
    plan_free(b);
    plan_free(pl);
    return 0;
}
