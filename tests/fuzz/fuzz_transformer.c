/* fuzz_transformer.c: libFuzzer entry point for the transformer loader (Hugging Face
 * config.json and plumb-transformer/1) and the analytic profile built from it. Any input must
 * be rejected with a one-line message, or accepted as a model with a positive parameter count
 * whose profile on a fixed device validates and reloads unchanged; anything else (crash,
 * leak, UB, mismatch) is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"

static const char DEVICE[] =
    "{\"format\": \"plumb-cluster/1\", \"name\": \"f\", \"levels\": [{\"name\": \"nv\", "
    "\"count\": 8, \"bandwidth_gbit_per_s\": 2400, \"latency_us\": 3}], \"device_type\": \"g\", "
    "\"device_types\": [{\"name\": \"g\", \"memory_gib\": 80, \"speed\": 1, "
    "\"peak_tflops_by_precision\": {\"bf16\": 312}, \"memory_gbyte_per_s\": 2039, "
    "\"efficiency\": {\"gemm\": 0.8, \"attention\": 0.6, \"memory\": 0.85, "
    "\"kernel_overhead_us\": 5}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plumb_err err;
    err_clear(&err);
    cJSON *root = json_parse_text("fuzz.json", (const char *)data, size, &err);
    if (!root) return 0;
    transformer *t = transformer_from_json(root, "fuzz.json", &err);
    cJSON_Delete(root);
    if (!t) {
        if (!err.msg[0] || strchr(err.msg, '\n')) abort(); /* one line that says why */
        return 0;
    }
    if (transformer_param_count(t) <= 0 || transformer_forward_flops(t) <= 0) abort();
    if (t->layers > 2000) t->layers = 2000; /* keep one input fast; the sizes still vary */
    cJSON *cj = json_parse_text("d.json", DEVICE, sizeof DEVICE - 1, &err);
    cluster *c = cj ? cluster_from_json(cj, "d.json", &err) : NULL;
    cJSON_Delete(cj);
    if (!c) abort();
    llm_options o;
    llm_options_init(&o);
    profile *p = llm_profile_build(t, c, "d.json", &o, &err);
    if (!p) abort(); /* tp 1 at the model's own length is always valid */
    if (profile_validate(p, "p", &err)) abort();
    cJSON *pj = profile_to_json(p);
    profile *q = pj ? profile_from_json(pj, "p", &err) : NULL;
    cJSON_Delete(pj);
    if (!q || !profile_equal(p, q)) abort();
    profile_free(q);
    profile_free(p);
    cluster_free(c);
    transformer_free(t);
    return 0;
}
