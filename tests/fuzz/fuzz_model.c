/* fuzz_model.c: libFuzzer entry point for the model-spec loader (plumb-model/1). Any input
 * must be rejected with a message or accepted as a model whose inferred shapes, parameter
 * counts and offsets agree with each other; a small accepted model is also initialized, and
 * its fingerprint must be stable. Anything else (crash, leak, UB, disagreement) is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/checkpoint.h"
#include "exec/model.h"

/* Parameters the target initializes at most (larger models are checked, not initialized). */
#define FUZZ_INIT_MAX 200000

/* Checks the shapes and counts of layers ls[0..n) laid out from offset `at`; returns the
 * parameters they hold, and aborts on a disagreement. */
static long long check_layers(const layer *ls, int n, long long at)
{
    long long total = 0;
    for (int i = 0; i < n; i++) {
        const layer *L = &ls[i];
        if (!L->name || L->nparams < 0 || L->param_offset != at + total) abort();
        if (L->in_ndim < 1 || L->in_ndim > MODEL_MAX_DIMS) abort();
        if (L->out_ndim < 1 || L->out_ndim > MODEL_MAX_DIMS) abort();
        for (int d = 0; d < L->out_ndim; d++)
            if (L->out_shape[d] <= 0) abort();
        if (!(L->flops >= 0) || L->flops > 1e300) abort(); /* NaN fails the first test */
        if (L->kind == LK_RESIDUAL) {
            if (L->nchildren < 1 || !L->children) abort();
            if (check_layers(L->children, L->nchildren, L->param_offset) != L->nparams) abort();
        } else if (L->nchildren) {
            abort();
        }
        if (i + 1 < n) { /* a layer's output is the next one's input */
            if (L->out_ndim != ls[i + 1].in_ndim) abort();
            for (int d = 0; d < L->out_ndim; d++)
                if (L->out_shape[d] != ls[i + 1].in_shape[d]) abort();
        }
        total += L->nparams;
    }
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    plumb_err err;
    model *m = model_parse("fuzz.json", text, &err);
    free(text);
    if (!m) {
        if (!err.msg[0]) abort(); /* a rejection must say why */
        return 0;
    }
    if (m->nlayers < 1 || m->layers[m->nlayers - 1].kind != LK_XENT) abort();
    if (m->classes < 1 || model_targets_per_sample(m) < 1) abort();
    if (check_layers(m->layers, m->nlayers, 0) != m->nparams) abort();
    if (model_range_params(m, 0, m->nlayers - 1) != m->nparams) abort();
    if (m->nparams <= FUZZ_INIT_MAX) {
        float *w = malloc(((size_t)m->nparams + 1) * sizeof(float));
        if (w) {
            model_init_params(m, 0, m->nlayers - 1, w);
            for (long long i = 0; i < m->nparams; i++)
                if (!(w[i] >= -10.0f && w[i] <= 10.0f)) abort(); /* finite and bounded */
            free(w);
        }
    }
    if (model_fingerprint(m) != model_fingerprint(m)) abort();
    model_free(m);
    return 0;
}
