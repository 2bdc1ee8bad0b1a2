/* llm_profile_bounds.c: the line an analytic profile's build gives when in-bounds options
 * (--seq-len, --microbatch-size) or a slow device (the cluster's peak or memory bandwidth)
 * make one of its figures leave the bounds a profile takes (core/bounds.h). */
#include "planner/llm_profile.h"

#include <stdio.h>

#include "core/bounds.h"
#include "core/device.h"

void llm_profile_explain_bounds(const profile *pr, const transformer *t, const cluster *c,
                                const char *cluster_file, const device_type *dev,
                                const llm_options *o, long long seq, plumb_err *err)
{
    for (int i = 0; i < pr->nlayers; i++) {
        const profile_layer *l = &pr->layers[i];
        const struct { const char *name, *what; double v, hi; int time; } f[] = {
            {"forward_ms", "take %g ms for its forward", l->forward_ms, BOUND_LAYER_MS_MAX, 1},
            {"backward_ms", "take %g ms for its backward", l->backward_ms, BOUND_LAYER_MS_MAX, 1},
            {"backward_input_ms", "take %g ms for its input gradient", l->backward_input_ms,
             BOUND_LAYER_MS_MAX, 1},
            {"backward_weight_ms", "take %g ms for its weight gradient", l->backward_weight_ms,
             BOUND_LAYER_MS_MAX, 1},
            {"activation_bytes", "output %g bytes", l->activation_bytes, BOUND_BYTES_MAX, 0},
            {"saved_bytes", "keep %g bytes for its backward", l->saved_bytes, BOUND_BYTES_MAX, 0},
            {"workspace_bytes", "need %g bytes of workspace", l->workspace_bytes,
             BOUND_BYTES_MAX, 0},
            {"flops", "take %g FLOPs", l->flops, BOUND_FLOPS_MAX, 0}};
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
            if (f[k].v <= f[k].hi) continue; /* NaN falls through: named as out of bounds */
            char what[96], unit[8] = "";
            snprintf(what, sizeof what, f[k].what, f[k].v);
            const char *noun = i >= 1 && i <= (int)t->layers ? "a block" : "the model's ";
            char who[64];
            snprintf(who, sizeof who, "%s%s", noun, noun[0] == 'a' ? "" : l->name ? l->name : "?");
            snprintf(unit, sizeof unit, "%s", f[k].time ? " ms" : "");
            int ti = (int)(dev - c->types);
            double peak = dev->peak_flops_prec[o->precision] > 0
                ? dev->peak_flops_prec[o->precision] : dev->peak_flops;
            char field[96];
            if (f[k].time && peak < 1e12) {
                if (dev->peak_flops_prec[o->precision] > 0)
                    snprintf(field, sizeof field, "device_types[%d].peak_tflops_by_precision.%s",
                             ti, dev_precision_name(o->precision));
                else
                    snprintf(field, sizeof field, "device_types[%d].peak_tflops", ti);
                err_set(err, cluster_file, field, "%g TFLOP/s make %s %s (layers[%d].%s), "
                        "beyond the %g%s a profile takes", peak / 1e12, who, what, i,
                        f[k].name, f[k].hi, unit);
            } else if (f[k].time && dev->memory_Bps > 0 && dev->memory_Bps < 1e10) {
                snprintf(field, sizeof field, "device_types[%d].memory_gbyte_per_s", ti);
                err_set(err, cluster_file, field, "%g GB/s make %s %s (layers[%d].%s), beyond "
                        "the %g%s a profile takes", dev->memory_Bps / 1e9, who, what, i,
                        f[k].name, f[k].hi, unit);
            } else if (o->microbatch > 1 && seq > t->max_positions) {
                err_set(err, NULL, "--seq-len", "%lld tokens x --microbatch-size %d make %s %s "
                        "(layers[%d].%s), beyond the %g%s a profile takes", seq, o->microbatch,
                        who, what, i, f[k].name, f[k].hi, unit);
            } else if (o->microbatch > 1) {
                err_set(err, NULL, "--microbatch-size", "%d sequences of %lld tokens make %s "
                        "%s (layers[%d].%s), beyond the %g%s a profile takes", o->microbatch,
                        seq, who, what, i, f[k].name, f[k].hi, unit);
            } else {
                err_set(err, NULL, "--seq-len", "%lld tokens make %s %s (layers[%d].%s), "
                        "beyond the %g%s a profile takes", seq, who, what, i, f[k].name,
                        f[k].hi, unit);
            }
            return;
        }
    }
}

