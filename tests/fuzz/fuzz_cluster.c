/* fuzz_cluster.c: libFuzzer entry point for the cluster loader. Any input must be either
 * rejected with a message or accepted as a cluster that validates and survives
 * to_json -> from_json unchanged; anything else (crash, leak, UB, mismatch) is a finding. */
#include <stdint.h>
#include <stdlib.h>

#include "core/cluster.h"
#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plumb_err err;
    cJSON *root = json_parse_text("fuzz.json", (const char *)data, size, &err);
    if (!root) return 0;
    cluster *c = cluster_from_json(root, "fuzz.json", &err);
    cJSON_Delete(root);
    if (!c) {
        if (!err.msg[0]) abort(); /* a rejection must say why */
        return 0;
    }
    if (cluster_validate(c, "fuzz.json", &err)) abort();
    cJSON *j = cluster_to_json(c);
    if (!j) abort();
    cluster *b = cluster_from_json(j, "again.json", &err);
    cJSON_Delete(j);
    if (!b || !cluster_equal(c, b)) abort(); /* saved form must reload identically */
    cluster *k = cluster_clone(c);
    if (!k || !cluster_equal(c, k)) abort();
    for (int d = 0; d < c->ndevices && d < 64; d++)
        if (!cluster_device_type(c, d) || cluster_level_between(c, 0, d) >= c->nlevels) abort();
    cluster_free(k);
    cluster_free(b);
    cluster_free(c);
    return 0;
}
