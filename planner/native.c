/* native.c: plumb's native planner: input checks, candidate gathering over device orders,
 * the baselines every plan is ranked against (data parallelism, straight pipelines),
 * simulator-in-the-loop ranking, the "what would fit" search, and planner_native itself
 * (one schedule; NATIVE_SCHED_AUTO goes to planner_auto in auto.c). The cost model and
 * the dynamic program are in native_model.c, native_stage.c, native_price.c and native_dp.c. */
#include "planner/native_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/policy.h"
#include "sim/memory.h" /* sim_memory_optimizer_mul */
#include "sim/sim.h"

void native_options_init(native_options *o)
{
    memset(o, 0, sizeof *o);
    o->schedule = SCHED_1F1B_FLUSH;
    o->recompute = NATIVE_RECOMPUTE_AUTO;
    o->optimizer = OPT_MOMENTUM;
}

void native_result_free(native_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->ncand; i++) plan_free(r->cand[i].pl);
    free(r->cand);
    memset(r, 0, sizeof *r);
}

double nm_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}


static int used_devices(const cluster *c, const native_options *o)
{
    return o && o->max_devices > 0 && o->max_devices < c->ndevices ? o->max_devices
                                                                    : c->ndevices;
}

int planner_native_check(const profile *p, const cluster *c, const native_options *o,
                         plumb_err *err)
{
    const char *pn = p && p->name ? p->name : "?", *cn = c && c->name ? c->name : "?";
    if (!p || p->nlayers < 1)
        return err_set(err, NULL, NULL, "profile %s has no layers: nothing to plan", pn);
    if (!c || c->ndevices < 1 || c->nlevels < 1)
        return err_set(err, NULL, NULL, "cluster %s has no devices: nothing to plan on", cn);
    if (p->minibatch < 1)
        return err_set(err, NULL, NULL, "profile %s: minibatch: expected >= 1 sample (got %d)",
                       pn, p->minibatch);
    for (int l = 0; l < c->nlevels; l++)
        if (!(c->levels[l].bandwidth_Bps > 0) || !isfinite(c->levels[l].bandwidth_Bps))
            return err_set(err, NULL, NULL, "cluster %s: level %d (%s) has bandwidth %g "
                           "Gbit/s: no data could cross it (expected > 0)", cn, l,
                           c->levels[l].name ? c->levels[l].name : "?",
                           c->levels[l].bandwidth_Bps * 8 / 1e9);
    int nd = used_devices(c, o);
    double total_cap = 0, max_cap = 0;
    double lim = o ? o->memory_limit_bytes : 0;
    for (int d = 0; d < nd; d++) {
        const device_type *t = cluster_device_type(c, d);
        if (!t || !(t->memory_bytes > 0) || !(t->speed > 0))
            return err_set(err, NULL, NULL, "cluster %s: device %d (%s) has %s 0: it can hold "
                           "or compute nothing", cn, d, t && t->name ? t->name : "?",
                           t && !(t->speed > 0) ? "speed" : "memory");
        double cap = lim > 0 && lim < t->memory_bytes ? lim : t->memory_bytes;
        total_cap += cap;
        if (cap > max_cap) max_cap = cap;
    }
    if (!(profile_compute_ms(p) > 0))
        return err_set(err, NULL, NULL, "profile %s: every layer takes 0 ms: nothing to pipeline",
                       pn);
    double per = 2 + sim_memory_optimizer_mul(o ? o->optimizer : OPT_MOMENTUM);
    /* the least any plan holds: a tied tensor once (both its layers on one stage) */
    double params = profile_total_parameter_bytes(p);
    for (int i = 0; i < p->nlayers; i++) params -= p->layers[i].tied_bytes;
    double need = params * per;
    if (need > total_cap)
        return err_set(err, NULL, NULL, "profile %s does not fit cluster %s: its weights, "
                       "gradients and %s state need %.2f GiB but the %d devices hold %.2f GiB "
                       "in all%s", pn, cn, optimizer_kind_name(o ? o->optimizer : OPT_MOMENTUM),
                       nm_gib(need), nd, nm_gib(total_cap),
                       lim > 0 ? " under the memory limit" : "");
    /* a layer's least: under ZeRO-1 its optimizer state split over every device (the
     * total above holds: r replicas hold r weights and gradients and one state) */
    double per1 = o && o->zero ? 2 + (per - 2) / nd : per;
    for (int i = 0; i < p->nlayers; i++)
        if (p->layers[i].parameter_bytes * per1 > max_cap)
            return err_set(err, NULL, NULL, "profile %s does not fit cluster %s: layer %s alone "
                           "needs %.2f GiB for its weights, gradients and optimizer state%s "
                           "but the largest device holds %.2f GiB", pn, cn, p->layers[i].name,
                           nm_gib(p->layers[i].parameter_bytes * per1),
                           o && o->zero ? " (zero 1: the state split over every device)" : "",
                           nm_gib(max_cap));
    return 0;
}

int native_default_microbatches(const plan *pl, sched_kind k)
{
    if (!pl || pl->nstages < 1) return 1;
    if (sched_kind_chunked(k)) {
        int ranks = pl->nstages / (pl->chunks > 0 ? pl->chunks : 1);
        return 2 * (ranks > 0 ? ranks : 1);
    }
    int *reps = malloc((size_t)pl->nstages * sizeof *reps);
    if (!reps) return 4 * pl->nstages;
    for (int i = 0; i < pl->nstages; i++) reps[i] = pl->stages[i].replicas;
    int M = nm_policy_microbatches(k, pl->nstages, reps);
    free(reps);
    return M;
}

/* --- models and candidates -------------------------------------------------------------- */

int nm_models_build(nm_models *ms, const profile *p, const cluster *c, int ndev,
                    double mem_limit, plumb_err *err)
{
    memset(ms, 0, sizeof *ms);
    int *orders = malloc(2 * (size_t)ndev * sizeof *orders);
    if (!orders) return err_set(err, NULL, NULL, "out of memory");
    int no = nm_orders(c, ndev, orders);
    ms->ndev = ndev;
    for (int k = 0; k < no; k++) {
        if (nm_model_build(&ms->m[k], p, c, ndev, orders + (size_t)k * ndev, mem_limit, err)) {
            free(orders);
            nm_models_free(ms);
            return -1;
        }
        ms->n++;
    }
    free(orders);
    return 0;
}

void nm_models_free(nm_models *ms)
{
    for (int k = 0; k < ms->n; k++) nm_model_free(&ms->m[k]);
    ms->n = 0;
}

void nm_cands_free(nm_cands *cs)
{
    for (int i = 0; i < cs->n; i++) free(cs->v[i].sim_dev_peak);
    free(cs->v);
    plan_free(cs->pre_plan);
    memset(cs, 0, sizeof *cs);
}

int nm_cands_push(nm_cands *cs, const nm_cand *c)
{
    if (cs->n == cs->cap) {
        int nc = cs->cap ? 2 * cs->cap : 16;
        nm_cand *v = realloc(cs->v, (size_t)nc * sizeof *v);
        if (!v) return -1;
        cs->v = v;
        cs->cap = nc;
    }
    cs->v[cs->n++] = *c;
    return 0;
}

#define NM_PARTS 8
#define NM_EQ_EACH 2  /* partitions kept per equal replica count */
#define NM_EQ_PARTS 64 /* and at most this many in all */
#define NM_EQ_WAIT 0.05 /* the waiting that asks for them (any_waiting) */

/* The microbatch count the program prices with when none is given: a guess for the
 * memory bound and the all-reduce share (2 per device); 0 for pipedream and 2bw, whose
 * memory does not depend on it and whose fixed counts must split evenly over the replicas
 * (a guess would rule out every replica count that does not divide it). */
static int program_m(const nm_model *m, sched_kind k)
{
    return sched_traits_of(k)->mb_per_replica ? 0 : 2 * m->ndev;
}

/* Sets c's microbatch count to the default of its partition and prices it; when that does
 * not fit memory (gpipe stashes every microbatch), the smaller fallback count. */
static void settle_m(const nm_model *m, nm_cand *c)
{
    c->s.M = nm_default_microbatches(m, c->s.kind, &c->pt);
    nm_price(m, &c->s, &c->pt);
    if (c->pt.fits) return;
    int lm = nm_legacy_microbatches(m, c->s.kind, &c->pt);
    if (lm >= c->s.M) return;
    c->s.M = lm;
    nm_price(m, &c->s, &c->pt);
}

int nm_baselines(const nm_models *ms, const nm_setting *s, int fixedM, nm_cands *out,
                 int *dp_runs, int *have)
{
    if (ms->n < 1 || sched_kind_chunked(s->kind)) return 0;
    const nm_model *m = &ms->m[0];
    nm_part parts[3];
    int n = 1;
    /* data parallelism: every block on every unit (not when more stages are pinned) */
    memset(&parts[0], 0, sizeof parts[0]);
    parts[0].nst = parts[0].ranks = 1;
    parts[0].st[0] = (nm_stage){0, m->nb, 0, m->U};
    const int i0 = *have & 1 || s->nstages > 1 ? 1 : 0;
    /* straight pipelines: the program with one unit per stage */
    if (m->g == 1 && !(*have & 2)) {
        nm_model one = *m;
        one.kept = NULL; /* other replica counts than m's programs */
        one.nr = 1;
        one.rlist[0] = 1;
        nm_setting g = *s;
        if (!fixedM) g.M = program_m(m, s->kind);
        n += nm_partitions(&one, &g, parts + 1, 2, dp_runs);
    }
    int added = 0;
    for (int i = i0; i < n; i++) {
        nm_cand c = {.mod = 0, .s = *s, .pt = parts[i], .must = 1};
        if (fixedM) nm_price(m, &c.s, &c.pt);
        else settle_m(m, &c);
        if (!c.pt.fits) continue;
        if (nm_cands_push(out, &c)) return -1;
        *have |= c.pt.nst == 1 && c.pt.st[0].r == m->U ? 1 : 2;
        added++;
    }
    return added;
}

/* Whether one of parts[0..n) (priced under s) waits where it matters: the replay of its
 * compute order (nm_rr_applies: its replicas' waiting on out-of-phase neighbours, or with
 * a replica's few microbatches the order's fill and drain) makes its iteration more than
 * NM_EQ_WAIT longer than the closed form `M x period + fill + all-reduce` the program
 * optimised, and that closed form is within NM_EQ_WAIT of the best priced partition's
 * time per microbatch: its waiting is what puts it behind. A partition that the closed
 * form already puts behind is no reason to look further. */
static int any_waiting(const nm_setting *s, const nm_part *parts, int n)
{
    const sched_traits *tr = sched_traits_of(s->kind);
    double cf[NM_PARTS + NM_EQ_PARTS], least = INFINITY;
    if (n > NM_PARTS + NM_EQ_PARTS) n = NM_PARTS + NM_EQ_PARTS;
    for (int i = 0; i < n; i++) {
        const nm_part *p = &parts[i];
        cf[i] = p->M * p->period + (tr->async ? 0 : p->fill) + p->ar;
        if (p->iter_s > 0 && p->M > 0 && p->iter_s / p->M < least) least = p->iter_s / p->M;
    }
    for (int i = 0; i < n; i++)
        if (cf[i] <= (1 + NM_EQ_WAIT) * least * parts[i].M &&
            parts[i].iter_s > (1 + NM_EQ_WAIT) * cf[i])
            return 1;
    return 0;
}

/* any_waiting of parts as priced under the default runtime (overlap): the partitions
 * proposed are the same under every runtime (the program prices none of it), and only
 * their estimates, which pick those simulated, know it. With the parts priced under p2p
 * sync, any_waiting missed squeezenet1_0's 16-16 on the heterogeneous cluster (60,401
 * samples/s simulated; data parallelism's 57,052 was returned instead). */
static int waiting_overlapped(const nm_model *m, const nm_setting *s, const nm_part *parts,
                              int n)
{
    if (!s->p2p_sync && !s->grad_sync_end) return any_waiting(s, parts, n);
    nm_setting o = *s;
    o.p2p_sync = o.grad_sync_end = 0;
    nm_part q[NM_PARTS];
    if (n > NM_PARTS) n = NM_PARTS;
    for (int i = 0; i < n; i++) {
        q[i] = parts[i];
        nm_price(m, &o, &q[i]);
    }
    return any_waiting(&o, q, n);
}

/* The partitions with every stage on the same number of units r, for each count r of m's
 * list that leaves room for two stages (but one device: the straight pipelines of
 * nm_baselines), at most max in all into parts: the program sees one stage at a time and
 * cannot price the waiting of unequal counts (native_rr.c), so it is also asked for these,
 * whose replicas never wait on an out-of-phase neighbour. Returns how many. */
static int equal_partitions(const nm_model *m, const nm_setting *g, nm_part *parts, int max,
                            int *dp_runs)
{
    int n = 0;
    for (int ri = 0; ri < m->nr && n < max; ri++) {
        int r = m->rlist[ri];
        if (r * m->g == 1) continue; /* straight pipelines: nm_baselines' */
        if (2 * r > m->U) break;     /* one stage: data parallelism, the main program's */
        nm_model one = *m;
        one.kept = NULL; /* other replica counts than m's programs */
        one.nr = 1;
        one.rlist[0] = r;
        n += nm_partitions(&one, g, parts + n, max - n < NM_EQ_EACH ? max - n : NM_EQ_EACH,
                           dp_runs);
    }
    return n;
}

int nm_gather(const nm_models *ms, const nm_setting *s, int fixedM, nm_cands *out,
              int *dp_runs)
{
    nm_part *parts = malloc((NM_PARTS + NM_EQ_PARTS) * sizeof *parts);
    if (!parts) return -1;
    int added = 0;
    int async = sched_traits_of(s->kind)->async;
    for (int pass = 0; pass < (async && !fixedM && !s->quick ? 2 : 1); pass++)
    for (int k = 0; k < ms->n; k++) {
        const nm_model *m = &ms->m[k];
        nm_setting g = *s;
        /* pipedream and 2bw: partitions for any replica counts, then for those dividing
         * 2 per device (the cost model ranks them less well than the others; both go
         * to the simulator) */
        if (!fixedM) g.M = pass ? 2 * m->ndev : program_m(m, s->kind);
        int n = nm_partitions(m, &g, parts, NM_PARTS, dp_runs);
        if (s->nstages <= 0 && !s->quick && waiting_overlapped(m, &g, parts, n))
            n += equal_partitions(m, &g, parts + n, NM_EQ_PARTS, dp_runs);
        for (int i = 0; i < n; i++) {
            nm_cand c = {.mod = k, .s = g, .pt = parts[i]};
            if (!fixedM) settle_m(m, &c);
            if (!c.pt.fits) continue;
            if (nm_cands_push(out, &c)) {
                free(parts);
                return -1;
            }
            added++;
        }
    }
    free(parts);
    return added;
}

int nm_reprice(const nm_models *ms, nm_cands *cs, int from, int to, sched_kind kind,
               int fixedM)
{
    int added = 0;
    for (int i = from; i < to; i++) {
        nm_cand c = cs->v[i];
        c.s.kind = kind;
        c.must = 0;
        if (!fixedM) settle_m(&ms->m[c.mod], &c);
        else nm_price(&ms->m[c.mod], &c.s, &c.pt);
        if (!c.pt.fits) continue;
        if (nm_cands_push(cs, &c)) return -1;
        added++;
    }
    return added;
}

/* Ranking keys: 0 simulated and fits, 1 estimated and fits, 2 does not fit. */
static int cand_class(const nm_cand *c)
{
    if (c->simulated) return c->sim_fits ? 0 : 2;
    return c->pt.fits ? 1 : 2;
}

static double cand_thr(const nm_cand *c) { return c->simulated ? c->sim_thr : c->pt.thr; }

static int cmp_est(const void *a, const void *b)
{
    const nm_cand *x = a, *y = b;
    if (x->pt.fits != y->pt.fits) return y->pt.fits - x->pt.fits;
    return (y->pt.thr > x->pt.thr) - (y->pt.thr < x->pt.thr);
}

/* The planner's ranking, one rule for candidates (nm_cand) and for results
 * (native_candidate, nm_rank_results): by class (0 simulated and fits, 1 estimated and
 * fits, 2 does not fit), then by throughput t (highest first) in classes 0 and 1, by peak
 * memory p (least first) in class 2. As a qsort comparison; 0 for a tie. */
static int rank_order(int cx, double tx, double px, int cy, double ty, double py)
{
    if (cx != cy) return cx - cy;
    if (cx == 2) return (px > py) - (px < py);
    return (ty > tx) - (ty < tx);
}

static double cand_peak(const nm_cand *c) { return c->simulated ? c->sim_peak : c->pt.peak_mem; }

static int cmp_rank(const void *a, const void *b)
{
    const nm_cand *x = a, *y = b;
    int cx = cand_class(x);
    double tx = cand_thr(x), ty = cand_thr(y);
    if (cx == cand_class(y) && cx != 2 && tx == ty)
        return x->copied - y->copied; /* a simulated plan before its copy */
    return rank_order(cx, tx, cand_peak(x), cand_class(y), ty, cand_peak(y));
}

double nm_result_thr(const native_candidate *c)
{
    return c->simulated ? c->sim_samples_per_s : c->est_samples_per_s;
}

double nm_result_peak(const native_candidate *c)
{
    return c->simulated ? c->sim_peak_memory_bytes : c->est_peak_memory_bytes;
}

static int result_class(const native_candidate *c) { return !c->fits ? 2 : c->simulated ? 0 : 1; }

static int cmp_result(const void *a, const void *b)
{
    const native_candidate *x = a, *y = b;
    return rank_order(result_class(x), nm_result_thr(x), nm_result_peak(x), result_class(y),
                      nm_result_thr(y), nm_result_peak(y));
}

void nm_rank_results(native_result *res)
{
    qsort(res->cand, (size_t)res->ncand, sizeof *res->cand, cmp_result);
}

static int same_plan(const nm_models *ms, const nm_cand *a, const nm_cand *b, int any_rc);

/* Timing class of a schedule on one stage: gpipe and 1f1b-flush run the same forwards and
 * backwards back to back (the order differs, not the time), as do pipedream and 2bw. */
static int one_stage_class(sched_kind k)
{
    return (int)sched_traits_of(k)->stage_twin;
}

/* Copies into c the simulated timing of an earlier single-stage twin in cs->v[0..n) (same
 * devices, layers, microbatches and recomputation, a schedule of the same timing); its
 * memory stays the model's. 1 when copied. */
static int copy_twin(const nm_models *ms, nm_cands *cs, int n, nm_cand *c)
{
    if (c->pt.nst != 1) return 0;
    for (int j = 0; j < n; j++) {
        const nm_cand *d = &cs->v[j];
        if (!d->simulated || d->copied || !(d->sim_thr > 0) || d->pt.nst != 1 ||
            one_stage_class(d->s.kind) != one_stage_class(c->s.kind) ||
            d->s.kind == c->s.kind)
            continue;
        nm_cand t = *d;
        t.s.kind = c->s.kind;
        if (!same_plan(ms, &t, c, 0)) continue;
        c->simulated = c->copied = 1;
        c->sim_thr = d->sim_thr;
        c->sim_iter = d->sim_iter;
        c->sim_bubble = d->sim_bubble;
        c->sim_peak = c->pt.peak_mem;
        c->sim_fits = c->pt.fits;
        c->sim_exact = d->sim_exact;
        return 1;
    }
    return 0;
}

/* 1 when a and b are the same plan; any_rc: whatever their recomputation. */
static int same_plan(const nm_models *ms, const nm_cand *a, const nm_cand *b, int any_rc)
{
    if (a->s.kind != b->s.kind || a->s.M != b->s.M || a->s.mbsize != b->s.mbsize ||
        (!any_rc && a->s.recompute != b->s.recompute) || a->pt.nst != b->pt.nst)
        return 0;
    const nm_model *ma = &ms->m[a->mod], *mb = &ms->m[b->mod];
    for (int i = 0; i < a->pt.nst; i++) {
        const nm_stage *x = &a->pt.st[i], *y = &b->pt.st[i];
        if (x->b0 != y->b0 || x->b1 != y->b1 || x->r != y->r ||
            ma->order[x->u * ma->g] != mb->order[y->u * mb->g])
            return 0;
    }
    return 1;
}

static int same_cand(const nm_models *ms, const nm_cand *a, const nm_cand *b)
{
    return same_plan(ms, a, b, 0);
}

/* 1 when a and b have the same replica counts, stage by stage (in devices). */
static int same_counts(const nm_models *ms, const nm_cand *a, const nm_cand *b)
{
    if (a->pt.nst != b->pt.nst) return 0;
    for (int i = 0; i < a->pt.nst; i++)
        if (a->pt.st[i].r * ms->m[a->mod].g != b->pt.st[i].r * ms->m[b->mod].g) return 0;
    return 1;
}

/* 1 when c recomputes although the same plan without recomputation fits with a margin
 * (5 % of the capacity, for what the cost model's memory may miss): recomputation then
 * only adds a forward pass per microbatch. */
static int needless_rc(const nm_models *ms, const nm_cands *cs, int n, const nm_cand *c)
{
    if (!c->s.recompute) return 0;
    for (int j = 0; j < n; j++) {
        const nm_cand *d = &cs->v[j];
        if (!d->s.recompute && d->pt.fits && d->pt.peak_mem <= 0.95 * d->pt.cap &&
            same_plan(ms, c, d, 1))
            return 1;
    }
    return 0;
}

/* Roughly the events simulating c takes: forwards, backwards and transfers of every
 * microbatch on every stage, and the all-reduce ring's 2 (r - 1) steps per gradient bucket,
 * per iteration of the first steady window. A step whose hops share no busy link is about
 * two events (docs/sim.md, "Grouped ring steps"), plus a visit of each hop, counted as
 * `visit` of an event (sim_actions: an eighth; it was r events before the simulator grouped
 * them). */
static double nm_actions(const nm_models *ms, const nm_cand *c, const native_options *o,
                         double visit)
{
    const nm_model *m = &ms->m[c->mod];
    int iters = o->sim_iterations > 0 ? o->sim_iterations
                : sched_kind_is_async(c->s.kind) ? 6 : 3;
    double acts = 3.0 * c->s.M * c->pt.nst;
    for (int i = 0; i < c->pt.nst; i++) {
        double r = c->pt.st[i].r * m->g, P = m->cP[c->pt.st[i].b1] - m->cP[c->pt.st[i].b0];
        if (r > 1 && P > 0) acts += 2 * (r - 1) * (2 + r * visit) * ceil(P / NM_BUCKET_BYTES);
    }
    return acts * iters;
}

static double sim_actions(const nm_models *ms, const nm_cand *c, const native_options *o)
{
    return nm_actions(ms, c, o, 1 / 8.0);
}

/* Sets c's sim_* figures and pl's predictions from f (exact: `plumb sim`'s figures). */
static void take_figures(nm_cand *c, plan *pl, const nm_sim_fig *f, int exact)
{
    c->simulated = 1;
    c->sim_thr = f->thr;
    c->sim_iter = f->iter;
    c->sim_bubble = f->bubble;
    c->sim_peak = f->peak;
    c->sim_fits = f->fits;
    c->sim_exact = exact;
    pl->pred_iteration_s = f->iter;
    pl->pred_samples_per_s = f->thr;
    free(pl->pred_peak_memory_bytes);
    pl->pred_peak_memory_bytes = calloc((size_t)pl->clus->ndevices, sizeof(double));
    if (pl->pred_peak_memory_bytes)
        for (int i = 0; i < f->ndev; i++)
            if (f->dev[i] >= 0 && f->dev[i] < pl->clus->ndevices)
                pl->pred_peak_memory_bytes[f->dev[i]] = f->dev_mem[i];
}

/* Sets c's sim_* figures and pl's predictions from r (exact: nm_sim_exact's word on it,
 * or 1 for a settled run); keeps them in o->sim_memo when memo. */
static void take_report(nm_cand *c, plan *pl, const sim_report *r, int exact,
                        const native_options *o, int memo)
{
    int *dev = malloc(((size_t)r->ndevices + 1) * sizeof *dev);
    double *mem = malloc(((size_t)r->ndevices + 1) * sizeof *mem);
    nm_sim_fig f = {r->samples_per_s, r->iteration_s, r->bubble_fraction, r->peak_memory_bytes,
                    r->fits, dev && mem ? r->ndevices : 0, dev, mem};
    for (int i = 0; i < f.ndev; i++) {
        dev[i] = r->devices[i].device;
        mem[i] = r->devices[i].mem.total;
    }
    take_figures(c, pl, &f, exact);
    if (memo && o->sim_memo && dev && mem) nm_sim_memo_put(o->sim_memo, &f);
    free(dev);
    free(mem);
}

/* Simulates c's steady window (or takes o->sim_memo's figures for its plan, not known to
 * be settled: settle_leaders runs it again if it leads); fills its sim_* figures. 0, or -1
 * when the simulator refused the plan. */
static int simulate(const nm_models *ms, nm_cand *c, const native_options *o, plan **out,
                    plumb_err *err)
{
    plan *pl = nm_plan(&ms->m[c->mod], &c->s, &c->pt, err);
    if (!pl) return -1;
    native_runtime_apply(pl, o); /* scored as it will run; the memo's key reads it */
    const nm_sim_fig *kept = o->sim_memo ? nm_sim_memo_get(o->sim_memo, pl, o) : NULL;
    if (kept) {
        take_figures(c, pl, kept, 0);
        *out = pl;
        return 0;
    }
    sim_report *r = nm_sim_score(pl, o, err);
    if (!r) {
        plan_free(pl);
        return -1;
    }
    take_report(c, pl, r, nm_sim_exact(r, o), o, 1);
    sim_report_free(r);
    *out = pl;
    return 0;
}

/* The simulated candidates of cs->v[0..keep) (plans[i] their plans) settled lazily: while
 * the one that fits with the highest throughput has a window that is not `plumb sim`'s
 * figure (sim_exact 0: pipedream's and 2bw's that had not settled), it is simulated again as
 * `plumb sim` runs its plan (nm_sim_settled) and takes that figure. On return the plan ranked
 * first is settled and at least as fast as every other candidate's figure, so its figures are
 * that command's (the window was off by up to 5 %: docs/planner-native.md, "The plan's
 * figures are `plumb sim`'s"); the others keep their window unless they led once. A settled
 * run costs what `plumb sim` does (seconds on thousands of devices), hence one at a time. A
 * run refused leaves the candidate as it was. */
static void settle_leaders(nm_cands *cs, int keep, const native_options *o, plan **plans,
                           native_result *res)
{
    for (;;) {
        int lead = -1;
        for (int i = 0; i < keep; i++) {
            const nm_cand *c = &cs->v[i];
            if (c->simulated && c->sim_fits && plans[i] &&
                (lead < 0 || c->sim_thr > cs->v[lead].sim_thr))
                lead = i;
        }
        if (lead < 0 || cs->v[lead].sim_exact) return;
        nm_cand *c = &cs->v[lead];
        plumb_err e;
        err_clear(&e);
        sim_report *r = nm_sim_settled(plans[lead], o, &e);
        res->nsimulated++;
        c->sim_exact = 1;
        if (!r) continue;
        take_report(c, plans[lead], r, 1, o, 0);
        sim_report_free(r);
    }
}

#define NM_MAX_RESULT 16
#define NM_EXTRA_ACTIONS 10000.0 /* simulated actions (F, B, sends) beyond the first nsim */
/* The work budget of one nm_finish (sim_actions' units, about half the IR's actions): what
 * the candidates it is bound to simulate (the leads, the first nsim, the baselines) may
 * take together, about 20 s on 2 cores (docs/sim.md, "Work budget") */
#define NM_MAX_SIM_ACTIONS 1e8
#define NM_BOUND_SLACK 1.05 /* nm_compute_bound's margin for the steady window's measure */

/* The fastest device's speed in m's order. */
static double fastest(const nm_model *m)
{
    double sp = 0;
    for (int d = 0; d < m->ndev; d++) {
        const device_type *t = cluster_device_type(m->c, m->order[d]);
        double v = t && t->speed > 0 ? t->speed : 1;
        if (v > sp) sp = v;
    }
    return sp;
}

/* The most samples per second n devices of m compute, each sample every layer's forward
 * and backward (the forward twice with recomputation) at the fastest device's speed;
 * INFINITY when the profile has no compute. */
static double compute_cap(const nm_model *m, int n, int recompute)
{
    const profile *p = m->p;
    double f = 0, b = 0;
    for (int i = 0; i < p->nlayers; i++) {
        if (profile_layer_is_input(&p->layers[i])) continue;
        f += p->layers[i].forward_ms;
        b += p->layers[i].backward_ms;
    }
    /* seconds of compute per sample on a device of speed 1 */
    double work = (f + b + (recompute ? f : 0)) * 1e-3 / (p->minibatch > 0 ? p->minibatch : 1);
    return work > 0 ? n * fastest(m) / work : INFINITY;
}

double nm_compute_bound(const nm_models *ms, const nm_cand *c)
{
    const nm_model *m = &ms->m[c->mod];
    const profile *p = m->p;
    int n = 0, nst = sched_kind_chunked(c->s.kind) ? c->pt.ranks : c->pt.nst;
    for (int s = 0; s < nst; s++) n += c->pt.st[s].r * m->g;
    double cap = compute_cap(m, n, c->s.recompute), sp = fastest(m);
    if (!isfinite(cap)) return cap;
    const sched_traits *tr = sched_traits_of(c->s.kind);
    if (tr->async || tr->split_backward || sched_kind_chunked(c->s.kind) || c->s.M < 1)
        return cap;
    /* a flushing pipeline (gpipe, 1f1b-flush): a replica of stage s runs at least
     * ceil(M / replicas) microbatches' F + B between its first forward, which waits for the
     * forwards of the stages before it, and its last backward, which the backwards of the
     * stages before it follow before the first stage steps and starts the next iteration */
    double scale = (double)c->s.mbsize / (p->minibatch > 0 ? p->minibatch : 1) * 1e-3 / sp;
    double before = 0, period = 0;
    for (int s = 0; s < c->pt.nst; s++) {
        const nm_stage *st = &c->pt.st[s];
        double F = m->cF[st->b1] - m->cF[st->b0], B = m->cB[st->b1] - m->cB[st->b0];
        double T = (F + B + (c->s.recompute ? F : 0)) * scale;
        int reps = st->r * m->g, per = (c->s.M + reps - 1) / reps;
        if (before + per * T > period) period = before + per * T;
        before += T;
    }
    double pipe = period > 0 ? c->s.M * c->s.mbsize / period : INFINITY;
    return pipe < cap ? pipe : cap;
}

/* Simulation order for o->best_only: by compute bound, highest first (the estimate
 * breaking ties), so the best plan is likely simulated first and bounds the rest. */
typedef struct nm_bound_ord {
    int i;
    double bound, est;
} nm_bound_ord;

static int cmp_bound(const void *a, const void *b)
{
    const nm_bound_ord *x = a, *y = b;
    if (x->bound != y->bound) return (y->bound > x->bound) - (y->bound < x->bound);
    if (x->est != y->est) return (y->est > x->est) - (y->est < x->est);
    return x->i - y->i;
}

/* Simulates c (or copies its single-stage twin's timing); *best raised to its throughput
 * when it fits. */
static void score_cand(const nm_models *ms, nm_cands *cs, int keep, nm_cand *c,
                       const native_options *o, plan **slot, double *best, native_result *res)
{
    if (copy_twin(ms, cs, keep, c)) { /* takes its place among the nsim */
        if (c->sim_fits && c->sim_thr > *best) *best = c->sim_thr;
        return;
    }
    if (cs->pre_plan && same_cand(ms, &cs->pre, c)) { /* simulated already (counted) */
        c->simulated = 1;
        c->sim_fits = cs->pre.sim_fits;
        c->sim_thr = cs->pre.sim_thr;
        c->sim_iter = cs->pre.sim_iter;
        c->sim_bubble = cs->pre.sim_bubble;
        c->sim_peak = cs->pre.sim_peak;
        c->sim_exact = cs->pre.sim_exact;
        *slot = cs->pre_plan;
        cs->pre_plan = NULL;
        if (c->sim_fits && c->sim_thr > *best) *best = c->sim_thr;
        return;
    }
    plumb_err e;
    err_clear(&e);
    if (simulate(ms, c, o, slot, &e)) {
        c->simulated = 1; /* refused: ranked with those that do not fit */
        c->sim_fits = 0;
        c->sim_peak = c->pt.peak_mem;
    }
    if (c->sim_fits && c->sim_thr > *best) *best = c->sim_thr;
    res->nsimulated++;
}

/* o->best_only: the candidates nm_finish would simulate whatever the results (the leads,
 * the first nsim, the cheap extras) and every baseline, in the order of their compute
 * bounds, each unless its bound is below the best simulated plan that fits: a superset of
 * what nm_finish simulates, less what cannot be the best. 0, or -1 out of memory. */
static int score_best_only(const nm_models *ms, nm_cands *cs, int keep, int nsim, int nlead,
                           const native_options *o, plan **plans, native_result *res)
{
    nm_bound_ord *ord = malloc(((size_t)keep + 1) * sizeof *ord);
    if (!ord) return -1;
    double extra = o->sim_top == 0 ? NM_EXTRA_ACTIONS : 0, best = 0;
    int n = 0, taken = 0;
    for (int i = 0; i < keep; i++) {
        nm_cand *c = &cs->v[i];
        if (!c->must && taken >= nsim && i >= nlead) {
            double acts = sim_actions(ms, c, o);
            if (acts > extra) continue;
            extra -= acts;
        }
        taken += !c->must;
        ord[n++] = (nm_bound_ord){i, nm_compute_bound(ms, c), c->pt.thr};
    }
    if (n > 0) qsort(ord, (size_t)n, sizeof *ord, cmp_bound);
    for (int j = 0; j < n; j++) {
        if (best > 0 && ord[j].bound * NM_BOUND_SLACK < best) continue;
        score_cand(ms, cs, keep, &cs->v[ord[j].i], o, &plans[ord[j].i], &best, res);
    }
    free(ord);
    return 0;
}

/* The work budget's measure of simulating c: nm_actions without the hop visits. The grouped
 * ring's visits cost far less than an eighth of an event each when the ring is wide:
 * resnet18 on dgx-h100 under pipedream, 13 simulations of up to 4096 replicas, counts 1.2e8
 * with them and simulated in 1.9 s all told (2026-12-08), so the budget would refuse a
 * search that takes seconds. */
static double budget_actions(const nm_models *ms, const nm_cand *c, const native_options *o)
{
    return nm_actions(ms, c, o, 0);
}

/* Refuses, before any is simulated, a search whose bound candidates (the leads, the first
 * nsim of the rest, the baselines: what nm_finish simulates whatever the results) would
 * together simulate more than o->sim_budget (0: NM_MAX_SIM_ACTIONS; sim_actions' units),
 * or one of them more than sim_run takes (SIM_MAX_ACTIONS, twice sim_actions: it would be
 * refused there and ranked as not fitting). Adds the estimate to res->sim_budget_used and
 * sets res->over_budget when refused. -1 with err, else 0. */
static int over_budget(const nm_models *ms, const nm_cands *cs, int keep, int nsim,
                       int nlead, const native_options *o, native_result *res, plumb_err *err)
{
    if (o->sim_top < 0) return 0;
    double limit = o->sim_budget > 0 ? o->sim_budget : NM_MAX_SIM_ACTIONS;
    double total = 0, top = 0;
    int n = 0, taken = 0, big = -1;
    for (int i = 0; i < keep; i++) {
        const nm_cand *c = &cs->v[i];
        if (!c->must && taken >= nsim && i >= nlead) continue;
        taken += !c->must;
        double a = budget_actions(ms, c, o);
        total += a;
        n++;
        if (a > top) top = a, big = i;
    }
    res->sim_budget_used += total;
    if (big < 0) return 0;
    const nm_cand *c = &cs->v[big];
    if (2 * top > SIM_MAX_ACTIONS) { /* sim_run would refuse it: say so, not "no fit" */
        res->over_budget = 1;
        return err_set(err, NULL, o->microbatches > 0 ? "--microbatches" : "microbatches",
                       "a plan the search must simulate makes about %.3g actions (%d stages x "
                       "%d microbatches), above the %.3g one run may take (about %.0f s): "
                       "expected fewer microbatches", 2 * top, c->pt.nst, c->s.M,
                       SIM_MAX_ACTIONS, SIM_MAX_ACTIONS / SIM_ACTIONS_PER_S);
    }
    if (total <= limit) return 0;
    res->over_budget = 1;
    return err_set(err, NULL, o->microbatches > 0 ? "--microbatches" : "microbatches",
                   "the %d plans the search must simulate make about %.3g simulated actions "
                   "(the largest %d stages x %d microbatches), above the %.3g %s may take "
                   "(about %.0f s): expected fewer microbatches", n, total, c->pt.nst,
                   c->s.M, limit, o->sim_budget > 0 ? "left to the sweep" : "one search",
                   2 * limit / SIM_ACTIONS_PER_S);
}

int nm_finish(const nm_models *ms, nm_cands *cs, const native_options *o, int nsim,
              native_result *res, plumb_err *err)
{
    if (cs->n > 0) qsort(cs->v, (size_t)cs->n, sizeof *cs->v, cmp_est);
    /* drop duplicates (the same plan from two orders or two thresholds) */
    int k = 0;
    for (int i = 0; i < cs->n; i++) {
        if (needless_rc(ms, cs, cs->n, &cs->v[i])) continue;
        int dup = -1;
        for (int j = 0; j < k && dup < 0; j++)
            if (same_cand(ms, &cs->v[j], &cs->v[i])) dup = j;
        if (dup < 0) cs->v[k++] = cs->v[i];
        else if (cs->v[i].must) cs->v[dup].must = 1;
    }
    cs->n = k;
    /* the best estimate of every schedule first, so each is kept and simulated */
    nm_cand *ord = malloc(((size_t)cs->n + 1) * sizeof *ord);
    char *lead = calloc((size_t)cs->n + 1, 1);
    if (!ord || !lead) {
        free(ord);
        free(lead);
        return err_set(err, NULL, NULL, "out of memory");
    }
    /* the baselines first (always kept), then the best estimate of each schedule (of each
     * recomputation choice and microbatch size when there is one schedule: the model's
     * error differs between them, up to 3x pessimistic without recomputation where the
     * all-reduce of a large stage is barely hidden, so each gets its best simulated) */
    int one_kind = 1;
    for (int i = 1; i < cs->n; i++) one_kind &= cs->v[i].s.kind == cs->v[0].s.kind;
    k = 0;
    int nmust = 0;
    for (int i = 0; i < cs->n; i++)
        if (cs->v[i].must && nmust < NM_MAX_RESULT / 2) {
            ord[k++] = cs->v[i];
            lead[i] = 1;
            nmust++;
        }
    /* with one schedule, the two best of each (recomputation, microbatch size): the pool
     * of three sizes x two choices would otherwise crowd out a partition the model
     * misjudges (gnmt on the heterogeneous cluster: 26475 estimated, 36637 simulated) */
    const int per_group = one_kind ? 2 : 1;
    /* the asynchronous kinds' second lead of a group has other replica counts than its
     * first: their replay is furthest off on some shapes of counts (pipedream's
     * 512-1024-1024-512-1024 for resnet18 on dgx-h100, two cuts of it estimated at 3.3 and
     * 3.5 M samples/s and simulated at 2.0 M, left 1024-1024-1024-1024, 3.3 M estimated
     * and 3.1 M simulated, unscored) */
    for (int i = 0; i < cs->n; i++) {
        if (lead[i]) continue;
        int ahead = 0, twin = 0;
        for (int j = 0; j < i; j++) {
            int in = lead[j] && !cs->v[j].must && cs->v[j].s.kind == cs->v[i].s.kind &&
                     (!one_kind || (cs->v[j].s.recompute == cs->v[i].s.recompute &&
                                    cs->v[j].s.mbsize == cs->v[i].s.mbsize));
            ahead += in;
            twin |= in && sched_traits_of(cs->v[i].s.kind)->async &&
                    same_counts(ms, &cs->v[j], &cs->v[i]);
        }
        if (ahead < per_group && !twin) {
            ord[k++] = cs->v[i];
            lead[i] = 1;
        }
    }
    const int nlead = k; /* simulated whatever nsim says */
    for (int i = 0; i < cs->n; i++)
        if (!lead[i]) ord[k++] = cs->v[i];
    if (cs->n > 0) memcpy(cs->v, ord, (size_t)cs->n * sizeof *ord);
    free(ord);
    free(lead);
    int keep = cs->n < NM_MAX_RESULT ? cs->n : NM_MAX_RESULT;
    if (over_budget(ms, cs, keep, nsim, nlead, o, res, err)) return -1;
    plan **plans = calloc((size_t)keep + 1, sizeof *plans);
    if (!plans) return err_set(err, NULL, NULL, "out of memory");
    /* simulate in that order: each schedule's best, then the next best estimates; past
     * nsim, when the count was not fixed, the next ones while they are cheap (the cost
     * model is optimistic for complicated hybrids; NM_EXTRA_ACTIONS simulated actions, a
     * few ms). The baselines last, each unless its estimate is already 5 % below the best
     * simulated plan that fits: the cost model is never that pessimistic for a single
     * stage or a straight pipeline (one replica per stage, no waves), so it would lose */
    double extra = o->sim_top == 0 ? NM_EXTRA_ACTIONS : 0, best = 0;
    if (o->best_only && o->sim_top >= 0) {
        if (score_best_only(ms, cs, keep, nsim, nlead, o, plans, res)) {
            free(plans);
            return err_set(err, NULL, NULL, "out of memory");
        }
    } else {
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0, simulated = 0; i < keep; i++) {
                nm_cand *c = &cs->v[i];
                if (c->must != pass || o->sim_top < 0) continue;
                if (pass == 0 && simulated >= nsim && i >= nlead) {
                    double acts = sim_actions(ms, c, o);
                    if (acts > extra) continue;
                    extra -= acts;
                }
                if (pass == 1 && best > 0 && c->pt.thr < 0.95 * best) continue;
                score_cand(ms, cs, keep, c, o, &plans[i], &best, res);
                simulated++;
            }
    }
    settle_leaders(cs, keep, o, plans, res);
    /* the memory of the kept candidates the simulator did not score (or refused) with
     * their plans' own counts (the program's closed form differs for replicated stages
     * and zb-h1): the figure reported for them and their fit. best_only: once a simulated
     * plan fits, it ranks above all of them whatever their memory, so they keep the
     * closed form's (the plan's schedule for a replicated stage at 1024 devices is
     * 5-50 ms; plumb sweep of resnet50 over 1..1024 GPUs spent 60 % of its time there) */
    int settled = 0;
    for (int i = 0; o->best_only && i < keep && !settled; i++)
        settled = cand_class(&cs->v[i]) == 0;
    for (int i = 0; i < keep && !settled; i++) {
        nm_cand *c = &cs->v[i];
        if (c->simulated && c->sim_thr > 0) continue;
        nm_price_exact(&ms->m[c->mod], &c->s, &c->pt);
        res->nexact++;
        if (c->simulated) c->sim_peak = c->pt.peak_mem;
    }
    /* rank the kept candidates, carrying their plans along */
    nm_cand *tmp = malloc((size_t)(keep + 1) * sizeof *tmp);
    int *idx = malloc((size_t)(keep + 1) * sizeof *idx);
    if (!tmp || !idx) goto oom;
    for (int i = 0; i < keep; i++) {
        tmp[i] = cs->v[i];
        tmp[i].pt.M = i; /* remember the original index through the sort */
    }
    if (keep > 0) qsort(tmp, (size_t)keep, sizeof *tmp, cmp_rank);
    for (int i = 0; i < keep; i++) {
        idx[i] = tmp[i].pt.M;
        tmp[i].pt.M = tmp[i].s.M;
    }
    res->cand = calloc((size_t)keep + 1, sizeof *res->cand);
    if (!res->cand) goto oom;
    res->nothing_fits = 1;
    for (int i = 0; i < keep; i++) {
        const nm_cand *c = &tmp[i];
        const nm_model *m = &ms->m[c->mod];
        native_candidate *nc = &res->cand[i];
        nc->pl = plans[idx[i]];
        plans[idx[i]] = NULL;
        if (!nc->pl) {
            plumb_err e;
            nc->pl = nm_plan(m, &c->s, &c->pt, &e);
            native_runtime_apply(nc->pl, o);
            if (nc->pl && c->copied) {
                nc->pl->pred_iteration_s = c->sim_iter;
                nc->pl->pred_samples_per_s = c->sim_thr;
            }
        }
        nc->schedule = c->s.kind;
        nc->microbatches = c->s.M;
        nc->microbatch_size = c->s.mbsize;
        nc->recompute = c->s.recompute;
        int ch = sched_kind_chunked(c->s.kind);
        nc->chunks = ch ? c->pt.nst / c->pt.ranks : 1;
        nc->nstages = c->pt.nst;
        nc->ndevices_used = 0;
        for (int s = 0; s < c->pt.nst; s++)
            nc->ndevices_used += ch ? (s < c->pt.ranks) : c->pt.st[s].r * m->g;
        nc->async = sched_kind_is_async(c->s.kind);
        nc->est_iteration_s = c->pt.iter_s;
        nc->est_samples_per_s = c->pt.thr;
        nc->est_peak_memory_bytes = c->pt.peak_mem;
        nc->simulated = c->simulated && c->sim_thr > 0;
        nc->sim_iteration_s = c->sim_iter;
        nc->sim_samples_per_s = c->sim_thr;
        nc->sim_bubble_fraction = c->sim_bubble;
        nc->sim_peak_memory_bytes = c->sim_peak;
        nc->capacity_bytes = c->pt.cap;
        nc->fits = cand_class(c) < 2;
        nm_config(m, &c->pt, nc->config, sizeof nc->config);
        if (nc->fits) res->nothing_fits = 0;
        if (nc->pl && res->single_samples_per_s > 0 && nc->pl->pred_samples_per_s > 0)
            nc->pl->pred_speedup_vs_1 = nc->pl->pred_samples_per_s / res->single_samples_per_s;
        res->ncand++;
    }
    if (keep == 0) res->nothing_fits = 1;
    nm_reasons(res);
    for (int i = 0; i < keep; i++) plan_free(plans[i]);
    free(plans);
    free(tmp);
    free(idx);
    return 0;
oom:
    for (int i = 0; i < keep; i++) plan_free(plans[i]);
    free(plans);
    free(tmp);
    free(idx);
    return err_set(err, NULL, NULL, "out of memory");
}

/* --- what would fit ---------------------------------------------------------------------- */

/* 1 when some partition for s fits p on c's first ndev devices; *peak its estimated peak. */
static int try_fit(const profile *p, const cluster *c, int ndev, const native_options *o,
                   const nm_setting *s, double *peak)
{
    nm_models ms;
    plumb_err e;
    if (nm_models_build(&ms, p, c, ndev, o->memory_limit_bytes, &e)) return 0;
    nm_cands cs = {0};
    int dp = 0, fit = nm_gather(&ms, s, o->microbatches > 0, &cs, &dp) > 0;
    if (fit) {
        *peak = INFINITY;
        for (int i = 0; i < cs.n; i++)
            if (cs.v[i].pt.peak_mem < *peak) *peak = cs.v[i].pt.peak_mem;
    }
    nm_cands_free(&cs);
    nm_models_free(&ms);
    return fit;
}

static void add_part(char *buf, size_t n, const char *text)
{
    size_t o = strlen(buf);
    if (o + 4 < n) snprintf(buf + o, n - o, "%s%s", o ? "; " : "", text);
}

void nm_suggest(const profile *p, const cluster *c, const native_options *o,
                const nm_setting *s, native_result *res, plumb_err *err)
{
    char sug[sizeof res->suggestion] = "";
    int ndev = used_devices(c, o);
    double peak, cap = res->capacity_bytes;
    nm_setting t;
    char part[160];
    if (!o->no_suggest) {
        if (!s->recompute) {
            t = *s;
            t.recompute = 1;
            if (try_fit(p, c, ndev, o, &t, &peak)) {
                snprintf(part, sizeof part, "recomputation (--recompute, peak %.1f GiB)",
                         nm_gib(peak));
                add_part(sug, sizeof sug, part);
            }
        }
        for (int mb = s->mbsize / 2; mb >= 1; mb /= 2) {
            t = *s;
            t.mbsize = mb;
            if (try_fit(p, c, ndev, o, &t, &peak)) {
                snprintf(part, sizeof part, "microbatches of %d samples (--microbatch-size %d, "
                         "peak %.1f GiB)", mb, mb, nm_gib(peak));
                add_part(sug, sizeof sug, part);
                break;
            }
        }
        if (sched_traits_of(s->kind)->hold == SCHED_HOLD_ALL || sched_traits_of(s->kind)->async) {
            t = *s;
            t.kind = SCHED_1F1B_FLUSH;
            if (try_fit(p, c, ndev, o, &t, &peak)) {
                snprintf(part, sizeof part, "schedule 1f1b-flush (fewer stashed activations, "
                         "peak %.1f GiB)", nm_gib(peak));
                add_part(sug, sizeof sug, part);
            }
        }
        for (int f = 2; f <= 16 && ndev * f <= PLANNER_MAX_GPUS; f *= 2) {
            int use = 0;
            plumb_err e;
            cluster *big = planner_cluster_resize(c, ndev * f, &use, &e);
            if (!big) break;
            int ok = try_fit(p, big, use, o, s, &peak);
            cluster_free(big);
            if (ok) {
                snprintf(part, sizeof part, "%d devices (peak %.1f GiB)", ndev * f,
                         nm_gib(peak));
                add_part(sug, sizeof sug, part);
                break;
            }
        }
    }
    snprintf(res->suggestion, sizeof res->suggestion, "%s",
             o->no_suggest ? "" : sug[0] ? sug : "nothing found (tried recomputation, "
             "microbatches down to 1 sample and up to 16x the devices)");
    err_set(err, NULL, NULL, "%s on %s: nothing fits in %.1f GiB per device (%s, microbatches "
            "of %d samples%s, %d devices)%s%s", p->name ? p->name : "?",
            c->name ? c->name : "?", nm_gib(cap), sched_kind_name(s->kind), s->mbsize,
            s->recompute ? ", recomputation" : "", ndev, o->no_suggest ? "" : "; would fit: ",
            res->suggestion);
}

/* --- planner_native ---------------------------------------------------------------------- */

static double single_thr(const profile *p, const cluster *c, int ndev)
{
    double best = 0, t = profile_compute_ms(p) * 1e-3;
    for (int d = 0; d < ndev; d++) {
        const device_type *ty = cluster_device_type(c, d);
        double sp = ty && ty->speed > 0 ? ty->speed : 1;
        if (t > 0 && p->minibatch / t * sp > best) best = p->minibatch / t * sp;
    }
    return best;
}

/* Shared start of planner_native and planner_auto: checks, result reset, models. */
int nm_begin(const profile *p, const cluster *c, const native_options *o, native_result *res,
             nm_models *ms, plumb_err *err)
{
    memset(res, 0, sizeof *res);
    if (planner_native_check(p, c, o, err)) return -1;
    if (o->microbatch_size < 0 || o->microbatches < 0 || o->chunks < 0 || o->nstages < 0 ||
        !(o->memory_limit_bytes >= 0))
        return err_set(err, NULL, NULL, "planner options: expected counts >= 0");
    /* --microbatches with --stages: every candidate's simulation is known before the
     * program prices any (each pricing replays the M microbatches: alexnet at 500000 x 16
     * stages spent 214 s there); one above SIM_MAX_ACTIONS is refused now, as over_budget
     * would after */
    double one = 6.0 * o->microbatches * o->nstages * SIM_DEFAULT_ITERATIONS;
    if (o->sim_top >= 0 && o->microbatches > 0 && o->nstages > 0 && one > SIM_MAX_ACTIONS) {
        res->over_budget = 1;
        return err_set(err, NULL, "--microbatches", "a plan the search must simulate makes "
                       "about %.3g actions (%d stages x %d microbatches), above the %.3g one "
                       "run may take (about %.0f s): expected fewer microbatches", one,
                       o->nstages, o->microbatches, SIM_MAX_ACTIONS,
                       SIM_MAX_ACTIONS / SIM_ACTIONS_PER_S);
    }
    int ndev = used_devices(c, o);
    if (nm_models_build(ms, p, c, ndev, o->memory_limit_bytes, err)) return -1;
    /* a pinned depth needs a unit of devices and a block of layers per stage */
    int most = ms->m[0].U < ms->m[0].nb ? ms->m[0].U : ms->m[0].nb;
    if (o->nstages > most) {
        nm_models_free(ms);
        return err_set(err, NULL, NULL, "stages: expected at most %d pipeline stages for %s on "
                       "%d devices (got %d)", most, p->name ? p->name : "?", ndev, o->nstages);
    }
    res->single_samples_per_s = single_thr(p, c, ndev);
    res->capacity_bytes = ms->m[0].rg[ms->m[0].U].cap;
    return 0;
}

/* best_only: the samples/s of data parallelism (s without recomputation), simulated and
 * kept in cs->pre when it fits (it is then among the baselines, nm_finish takes its plan
 * and figures); 0 when it does not fit or is not a baseline. */
static double dp_floor(const nm_models *ms, const native_options *o, const nm_setting *s,
                       int fixedM, nm_cands *cs, native_result *res)
{
    if (s->nstages > 1 || ms->n < 1) return 0;
    nm_cands one = {0};
    nm_setting s0 = *s;
    s0.recompute = 0;
    int have = 2, runs = 0; /* data parallelism only, no straight pipeline */
    double floor = 0;
    if (nm_baselines(ms, &s0, fixedM, &one, &runs, &have) == 1 && one.v[0].pt.nst == 1) {
        plumb_err e;
        err_clear(&e);
        plan *pl = NULL;
        if (simulate(ms, &one.v[0], o, &pl, &e) == 0) {
            res->nsimulated++;
            cs->pre = one.v[0];
            cs->pre.sim_dev_peak = NULL;
            cs->pre_plan = pl;
            floor = one.v[0].sim_fits ? one.v[0].sim_thr : 0;
        }
    }
    nm_cands_free(&one);
    return floor;
}

int nm_search(const nm_models *ms, const native_options *o, nm_setting *s,
              native_result *res, plumb_err *err)
{
    nm_cands cs = {0};
    int n = 0, fixedM = o->microbatches > 0;
    /* recomputation off, on, or (auto, the default) both, ranked by the simulator: it costs
     * a forward per microbatch but may let a better partition fit */
    int rc0 = o->recompute == 1 ? 1 : 0, rc1 = o->recompute == 0 ? 0 : 1;
    int have = 0; /* baselines that fit without recomputation need no recomputing twin */
    /* best_only: recomputation is not tried when all the devices recomputing could not
     * beat data parallelism as simulated (the recomputing candidates could not be best) */
    double floor = o->best_only && o->sim_top >= 0 && rc0 < rc1
                       ? dp_floor(ms, o, s, fixedM, &cs, res) : 0;
    if (floor > 0 &&
        compute_cap(&ms->m[0], ms->m[0].U * ms->m[0].g, 1) * NM_BOUND_SLACK < floor)
        rc1 = rc0;
    /* microbatches of the profiled size, and (unless --microbatch-size fixes it) of a half
     * and a quarter of it, as auto does: smaller ones free activation memory for other
     * partitions, fewer stages or more replicas; quarter and below only when nothing fits */
    const int mb0 = s->mbsize;
    for (int mb = mb0; mb >= 1 && n >= 0; mb /= 2) {
        int before = n;
        s->mbsize = mb;
        for (int rc = rc0; rc <= rc1 && n >= 0; rc++) {
            s->recompute = rc;
            int a = nm_gather(ms, s, fixedM, &cs, &res->dp_runs);
            int b = a < 0 ? 0 : nm_baselines(ms, s, fixedM, &cs, &res->dp_runs, &have);
            n = a < 0 || b < 0 ? -1 : n + a + b;
        }
        if (o->microbatch_size > 0 || (n > before && mb * 4 <= mb0)) break;
    }
    s->mbsize = mb0;
    if (n == 0) s->recompute = rc1; /* what the suggestions start from */
    /* chunked schedules simulate slowly (ranks x chunks stages): two of them */
    int nsim = o->sim_top > 0 ? o->sim_top : o->sim_top < 0 ? 0
               : sched_kind_chunked(s->kind) ? 2 : 4;
    if (n < 0) err_set(err, NULL, NULL, "out of memory");
    int ret = n < 0 || nm_finish(ms, &cs, o, nsim, res, err) ? -1 : 0;
    nm_cands_free(&cs);
    return ret;
}

static plan *best_plan(const native_result *res, plumb_err *err)
{
    for (int i = 0; i < res->ncand; i++)
        if (res->cand[i].fits && res->cand[i].pl) {
            plan *pl = plan_clone(res->cand[i].pl);
            if (!pl) err_set(err, NULL, NULL, "out of memory");
            return pl;
        }
    err_set(err, NULL, NULL, "no plan");
    return NULL;
}

plan *planner_native(const profile *p, const cluster *c, const native_options *o,
                     native_result *res, plumb_err *err)
{
    native_options dflt;
    native_result local;
    if (!o) {
        native_options_init(&dflt);
        o = &dflt;
    }
    if (!res) res = &local;
    double t0 = nm_now_ms();
    plan *best = NULL;
    if (o->schedule == NATIVE_SCHED_AUTO) {
        if (native_runtime_check(o, (sched_kind)NATIVE_SCHED_AUTO, err)) { /* kind-free rules */
            memset(res, 0, sizeof *res);
            goto done;
        }
        if (planner_auto(p, c, o, res, err)) goto done;
        if (res->nothing_fits) {
            nm_setting s = {.kind = SCHED_1F1B_FLUSH, .M = o->microbatches,
                            .mbsize = o->microbatch_size > 0 ? o->microbatch_size : p->minibatch,
                            .recompute = 0,
                            .chunks = o->chunks > 1 ? o->chunks
                                                    : sched_kind_chunks(SCHED_1F1B_FLUSH),
                            .opt = o->optimizer, .nstages = o->nstages,
                            .p2p_sync = o->p2p_sync ? 1 : 0,
                            .grad_sync_end = o->grad_sync_end ? 1 : 0,
                            .zero = o->zero ? 1 : 0};
            nm_suggest(p, c, o, &s, res, err);
            goto done;
        }
        best = best_plan(res, err);
        goto done;
    }
    if (o->schedule < 0 || o->schedule >= SCHED_NKINDS) {
        memset(res, 0, sizeof *res);
        err_set(err, NULL, NULL, "schedule: expected a schedule kind (got %d)", o->schedule);
        goto done;
    }
    if (native_runtime_check(o, (sched_kind)o->schedule, err)) { /* the owner's line */
        memset(res, 0, sizeof *res);
        goto done;
    }
    nm_models ms;
    if (nm_begin(p, c, o, res, &ms, err)) goto done;
    nm_setting s = {.kind = (sched_kind)o->schedule, .M = o->microbatches,
                    .mbsize = o->microbatch_size > 0 ? o->microbatch_size : p->minibatch,
                    .recompute = o->recompute == 1,
                    .chunks = o->chunks > 1 ? o->chunks
                                            : sched_kind_chunks((sched_kind)o->schedule),
                    .opt = o->optimizer, .nstages = o->nstages,
                    .p2p_sync = o->p2p_sync ? 1 : 0,
                    .grad_sync_end = o->grad_sync_end ? 1 : 0, .zero = o->zero ? 1 : 0};
    int rc = nm_search(&ms, o, &s, res, err);
    nm_models_free(&ms);
    if (rc) goto done;
    if (res->nothing_fits) {
        nm_suggest(p, c, o, &s, res, err);
        goto done;
    }
    best = best_plan(res, err);
done:
    res->plan_ms = nm_now_ms() - t0;
    if (res == &local) native_result_free(&local);
    return best;
}
