/* whatif3d.c: the dashboard's keys for a transformer's 3D layout: tensor-parallel ranks,
 * pipeline ranks, context-parallel ranks, data-parallel replicas, microbatch size,
 * interleave, recomputation, sequence parallelism and ZeRO, and its runtime (tp overlap,
 * the parameter all-gather under the forward, p2p, the gradient reduction's place,
 * attention). Each layout key steps to the nearest value the layout can take
 * (ui_layout3d_ok; tp and cp: ui_cp_applies; pp, interleave and schedule under
 * Megatron-Core's uneven split or layout string: ui_split_ok) or says why none exists; every change passes
 * the runtime check of `plumb plan --model` (ui_layout3d_check, FP8 primary weights
 * included) or is refused with its line. Pure data, like ui/whatif.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "core/schedule_traits.h"
#include "planner/llm_profile.h"
#include "planner/search3d.h"
#include "ui/whatif.h"

/* w's context-parallel ranks (a 2D what-if's 0 reads 1). */
static int cp_of(const ui_whatif *w) { return w->cp > 1 ? w->cp : 1; }

int ui_split_ok(const ui_state *st, const ui_whatif *w, char *why, size_t n)
{
    if (n) why[0] = 0;
    long long vs = (long long)w->pp * w->interleave;
    if (w->pp < 1 || w->interleave < 1) return 0;
    if (!layout3d_uneven(&st->lopt)) return vs <= st->layers && st->layers % vs == 0;
    layout3d_options o = ui_whatif_layout3d(&st->lopt, w);
    const char *name = layout3d_split_option(&o);
    /* layout3d_build's checks of the split (split_of): a schedule placing virtual stage k
     * on rank k % pp, then Megatron-Core's counts; one block of slack for each accounting */
    for (long long k = 0; k < vs && vs <= st->layers + 2; k++) {
        if (sched_kind_rank((sched_kind)w->schedule, (int)k, w->pp) == k % w->pp) continue;
        if (n) snprintf(why, n, "%s: expected a schedule that places virtual stage k on "
                        "pipeline rank k %% pp, as Megatron-Core's interleaving (got %s)",
                        name, sched_kind_name((sched_kind)w->schedule));
        return 0;
    }
    int *blocks = vs <= st->layers + 2 ? malloc((size_t)vs * sizeof *blocks) : NULL;
    plumb_err e;
    err_clear(&e);
    int ok = blocks && !layout3d_split(&o, st->layers, w->pp, w->interleave, blocks, &e);
    if (!ok && n) {
        if (blocks) snprintf(why, n, "%s", e.msg);
        else if (vs > st->layers + 2)
            snprintf(why, n, "%s: expected pp x interleave at most the %d blocks + the "
                     "embedding + the loss (got %d x %d)", name, st->layers, w->pp,
                     w->interleave);
        else snprintf(why, n, "out of memory");
    }
    free(blocks);
    return ok;
}

/* ui_layout3d_ok, with the split's own rules (ui_split_ok) only when split is 1 (else
 * pp x interleave at most the blocks + 2: a layout the even keys would reach). */
static int layout_ok(const ui_state *st, const ui_whatif *w, int split)
{
    if (w->tp < 1 || w->pp < 1 || w->dp < 1 || w->mbs < 1 || w->interleave < 1) return 0;
    if (w->tp > st->per_server || st->per_server % w->tp) return 0;
    if (split ? !ui_split_ok(st, w, NULL, 0) /* pp x interleave and the blocks */
              : (long long)w->pp * w->interleave > st->layers + 2)
        return 0;
    long long n = (long long)w->tp * cp_of(w) * w->pp * w->dp;
    if (n != w->ngpus || !ui_gpu_count_ok((int)n, st->per_server)) return 0;
    long long unit = (long long)w->dp * w->mbs;
    if (unit > st->global_batch || st->global_batch % unit) return 0;
    const sched_traits *tr = sched_traits_of((sched_kind)w->schedule);
    return tr && w->interleave >= tr->chunks_min && w->interleave <= tr->chunks_max;
}

int ui_layout3d_ok(const ui_state *st, const ui_whatif *w) { return layout_ok(st, w, 1); }

layout3d_options ui_whatif_layout3d(const layout3d_options *base, const ui_whatif *w)
{
    layout3d_options o = *base;
    o.gpus = w->ngpus;
    o.tp = w->tp, o.pp = w->pp, o.dp = w->dp;
    o.cp = cp_of(w);
    o.microbatch_size = w->mbs;
    o.interleave = w->interleave;
    o.schedule = w->schedule;
    o.recompute = w->recompute;
    o.checkpoint_layers = w->recompute == RECOMPUTE_FULL ? w->ckpt : -1; /* full's own */
    o.sequence_parallel = w->seqpar;
    o.zero = w->zero;
    o.p2p_sync = w->p2p_sync;
    o.grad_sync_end = w->grad_sync_end;
    o.attention = w->attention;
    return o;
}

int ui_layout3d_check(const ui_state *st, const ui_whatif *w, int asked, char *why, size_t n)
{
    layout3d_options o = ui_whatif_layout3d(&st->lopt, w);
    search3d_options so;
    plumb_err e;
    err_clear(&e);
    search3d_options_from_layout(&o, &so);
    if (asked & UI_ASK_TP_OVERLAP) so.tp_overlap = (plan_tp_overlap)w->tp_overlap;
    /* the all-gather apart where this layout takes it (search3d_apply_runtime: ZeRO 1, a
     * synchronous schedule) meets grad-sync end whichever key brought them together */
    const sched_traits *tr = sched_traits_of((sched_kind)w->schedule);
    int opg_taken = w->opg && w->zero == 1 && tr && !tr->async;
    if ((asked & UI_ASK_OPG) || (opg_taken && w->grad_sync_end))
        so.overlap_param_gather = w->opg;
    so.fp8_param_gather = w->fp8pg; /* as given: zero 0 under it is plan's to refuse */
    int rc = search3d_runtime_check(&so, &e);
    if (n) snprintf(why, n, "%s", rc ? e.msg : "");
    return rc;
}

int ui_cp_applies(const ui_state *st, const ui_whatif *w, int cp, char *why, size_t n)
{
    long long seq = st->lopt.seq;
    if (n) why[0] = 0;
    llm_cp_rule rule =
        llm_cp_check(cp, (llm_attention)w->attention, seq, w->tp, st->per_server);
    if (cp == 1) return 1;
    if (rule == LLM_CP_BAD_COUNT) {
        if (n) snprintf(why, n, "cp %d: expected 1 or more context-parallel ranks", cp);
    } else if (rule == LLM_CP_NEEDS_FLASH) {
        if (n) snprintf(why, n, "cp %d needs flash attention (f): Transformer Engine's "
                        "context parallelism runs its fused attention", cp);
    } else if (rule == LLM_CP_SPLITS_SEQ) {
        if (n) snprintf(why, n, "cp %d needs 2 x cp = %lld to divide the sequence of %lld "
                        "tokens", cp, 2LL * cp, seq);
    } else if (rule == LLM_CP_SPANS_SERVERS) {
        if (n) snprintf(why, n, "cp %d needs tp x cp = %d x %d to divide a server's %d "
                        "devices", cp, w->tp, cp, st->per_server);
    } else if (st->window > 0 && st->window < seq) {
        if (n) snprintf(why, n, "cp %d: the sliding window of %lld keys is shorter than the "
                        "sequence of %lld tokens (Transformer Engine's ring takes no window)",
                        cp, st->window, seq);
    } else {
        return 1;
    }
    return 0;
}

/* The field a stepping key changes, and how the others follow it. */
enum { F_TP, F_PP, F_DP, F_MBS, F_V, F_CP };

static void set_field(ui_whatif *w, int field, int v)
{
    switch (field) {
    case F_TP: /* the device count stays: dp follows */
    case F_PP:
    case F_CP: {
        if (field == F_TP) w->tp = v;
        else if (field == F_PP) w->pp = v;
        else w->cp = v;
        int group = w->tp * w->pp * cp_of(w);
        w->dp = w->ngpus % group ? 0 : w->ngpus / group;
        break;
    }
    case F_DP: /* the device count follows */
        w->dp = v;
        w->ngpus = w->tp * cp_of(w) * w->pp * v;
        break;
    case F_MBS: w->mbs = v; break;
    case F_V:
        w->interleave = v;
        /* more than one chunk needs a chunked schedule; back to one, the plain one */
        if (v > 1 && sched_traits_of((sched_kind)w->schedule)->chunks_max == 1)
            w->schedule = SCHED_INTERLEAVED;
        if (v == 1 && w->schedule == SCHED_INTERLEAVED) w->schedule = SCHED_1F1B_FLUSH;
        break;
    }
}

static int get_field(const ui_whatif *w, int field)
{
    static const size_t off[] = { offsetof(ui_whatif, tp), offsetof(ui_whatif, pp),
                                  offsetof(ui_whatif, dp), offsetof(ui_whatif, mbs),
                                  offsetof(ui_whatif, interleave) };
    return field == F_CP ? cp_of(w) : *(const int *)((const char *)w + off[field]);
}

/* Steps `field` from its value in st->cur towards dir to the nearest value whose layout is
 * ui_layout3d_ok (tp and cp: and ui_cp_applies); on none, st->note says why and st->cur
 * stays. */
static void step(ui_state *st, int field, int dir)
{
    static const char *const name[] = { "tp", "pp", "dp", "microbatch size", "interleave",
                                        "cp" };
    int hi = field == F_TP || field == F_CP ? st->per_server
             : field == F_PP || field == F_V ? st->layers
             : field == F_DP ? UI_MAX_GPUS : st->global_batch;
    for (int v = get_field(&st->cur, field) + dir; v >= 1 && v <= hi; v += dir) {
        ui_whatif w = st->cur;
        set_field(&w, field, v);
        if ((field == F_TP || field == F_CP) && !ui_cp_applies(st, &w, cp_of(&w), NULL, 0))
            continue; /* tp x cp within a server; cp's own rules */
        if (ui_layout3d_ok(st, &w)) {
            st->cur = w;
            if (st->cur.straggler >= st->cur.ngpus) st->cur.straggler = -1;
            return;
        }
    }
    const ui_whatif *w = &st->cur;
    char what[48];
    snprintf(what, sizeof what, "no %s %s %d", dir > 0 ? "larger" : "smaller", name[field],
             get_field(w, field));
    if (field == F_CP && dir > 0 &&
        (w->attention != LLM_ATTN_FLASH || (st->window > 0 && st->window < st->lopt.seq))) {
        ui_whatif two = *w;
        two.cp = 2;
        char why[sizeof st->note - sizeof what - 2];
        ui_cp_applies(st, &two, 2, why, sizeof why); /* its flash attention or window line */
        snprintf(st->note, sizeof st->note, "%s: %s", what, why);
        return;
    }
    if (field == F_CP) {
        snprintf(st->note, sizeof st->note, "%s: 2 x cp must divide the sequence of %lld "
                 "tokens, tp x cp a server's %d devices, tp x cp x pp x dp = devices (kept) "
                 "and dp x microbatch size the global batch %d", what, st->lopt.seq,
                 st->per_server, st->global_batch);
        return;
    }
    if ((field == F_PP || field == F_V) && layout3d_uneven(&st->lopt)) {
        /* the uneven split rides every layout: say what Megatron-Core's rule says of the
         * nearest value the other rules allow */
        char why[sizeof st->note - sizeof what - 16];
        for (int v = get_field(w, field) + dir; v >= 1 && v <= hi; v += dir) {
            ui_whatif next = *w;
            set_field(&next, field, v);
            if (!layout_ok(st, &next, 0) || ui_split_ok(st, &next, why, sizeof why)) continue;
            snprintf(st->note, sizeof st->note, "%s: %s %d: %s", what, name[field], v, why);
            return;
        }
    }
    const char *cp = cp_of(w) > 1 ? " x cp" : ""; /* as before without cp */
    snprintf(st->note, sizeof st->note, "%s: tp%s must divide a server's %d devices, pp x "
             "interleave the %d layers, tp%s x pp x dp = devices (%s) and dp x microbatch size "
             "the global batch %d", what, cp, st->per_server, st->layers, cp,
             field == F_DP ? "whole servers" : "kept", st->global_batch);
}

/* The R key: full recomputation's checkpoint interval one up, from the most blocks a
 * virtual stage of the layout holds (the bound plan --model checks) back to 0 (the stage's
 * input alone); with another recompute kind it says that the interval is full's. */
static void next_checkpoint(ui_state *st)
{
    ui_whatif *w = &st->cur;
    if (w->recompute != RECOMPUTE_FULL) {
        snprintf(st->note, sizeof st->note, "--checkpoint-layers: the interval of full "
                 "recomputation's checkpoints (r to full first; recompute is %s)",
                 recompute_kind_name((recompute_kind)w->recompute));
        return;
    }
    layout3d_options o = ui_whatif_layout3d(&st->lopt, w);
    plumb_err e;
    err_clear(&e);
    int most = layout3d_split_most(&o, st->layers, w->pp, w->interleave, &e);
    if (most < 1) {
        snprintf(st->note, sizeof st->note, "--checkpoint-layers: %.200s",
                 most < 0 ? e.msg : "the layout's stages do not split");
        return;
    }
    w->ckpt = w->ckpt >= most ? 0 : w->ckpt + 1;
}

/* The next schedule (dir) whose chunks the layout can take and that the runtime check
 * accepts (ui_layout3d_check: not zb-v or dualpipev under p2p sync): the interleave follows
 * the kind (one chunk, or the kind's default when the current one is outside its range). */
static void next_schedule(ui_state *st, int dir)
{
    char why[sizeof st->note] = "";
    for (int k = 1; k < SCHED_NKINDS; k++) {
        ui_whatif w = st->cur;
        w.schedule = (st->cur.schedule + dir * k + SCHED_NKINDS * k) % SCHED_NKINDS;
        const sched_traits *tr = sched_traits_of((sched_kind)w.schedule);
        if (tr->chunks_max == 1) w.interleave = 1;
        else if (w.interleave < tr->chunks_min || w.interleave > tr->chunks_max ||
                 (w.interleave == 1 && w.schedule == SCHED_INTERLEAVED))
            w.interleave = tr->chunks_default;
        if (ui_layout3d_ok(st, &w) && !ui_layout3d_check(st, &w, 0, why, sizeof why)) {
            st->cur = w;
            return;
        }
    }
    if (why[0]) snprintf(st->note, sizeof st->note, "no other schedule: %s", why);
    else snprintf(st->note, sizeof st->note, "no other schedule: pp x its chunks must divide "
                  "the %d layers", st->layers);
}

int ui_whatif3d_key(ui_state *st, int key)
{
    ui_whatif *w = &st->cur, before = st->cur;
    int asked = 0; /* UI_ASK_*: the setting a runtime key asks for */
    switch (key) {
    case 'g': step(st, F_TP, +1); break;
    case 'G': step(st, F_TP, -1); break;
    case 'd': step(st, F_PP, +1); break;
    case 'D': step(st, F_PP, -1); break;
    case 'w': case '+': case '=': step(st, F_DP, +1); break;
    case 'W': case '-': case '_': step(st, F_DP, -1); break;
    case 'n': case 'M': step(st, F_MBS, +1); break; /* fewer microbatches: larger ones */
    case 'N': case 'm': step(st, F_MBS, -1); break;
    case 'v': step(st, F_CP, +1); break;
    case 'V': step(st, F_CP, -1); break;
    case 'i': step(st, F_V, +1); break;
    case 'I': step(st, F_V, -1); break;
    case 'c': next_schedule(st, +1); break;
    case 'C': next_schedule(st, -1); break;
    case 'r': /* none -> selective -> full -> none */
        w->recompute = w->recompute == RECOMPUTE_NONE ? RECOMPUTE_SELECTIVE
                       : w->recompute == RECOMPUTE_SELECTIVE ? RECOMPUTE_FULL
                                                              : RECOMPUTE_NONE;
        break;
    case 'R': next_checkpoint(st); break;
    case 'a': w->seqpar = !w->seqpar; break;
    case 'o': w->zero = !w->zero; break;
    case 'k': /* none -> backward -> full -> none; K the other way */
    case 'K':
        w->tp_overlap = (w->tp_overlap + (key == 'k' ? 1 : TP_OVERLAP_NKINDS - 1)) %
                        TP_OVERLAP_NKINDS;
        asked = UI_ASK_TP_OVERLAP;
        break;
    case 'j': w->opg = !w->opg, asked = UI_ASK_OPG; break;
    case 'y': w->p2p_sync = !w->p2p_sync; break;
    case 'E': w->grad_sync_end = !w->grad_sync_end; break; /* reduce at the End */
    case 'f': w->attention = !w->attention; break; /* at cp > 1 layout3d_build refuses */
    default: return 0;
    }
    if (!ui_whatif_equal(w, &before) &&
        ui_layout3d_check(st, w, asked, st->note, sizeof st->note))
        st->cur = before; /* refused: the check's line says why */
    return 1;
}
