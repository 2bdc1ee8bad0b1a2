/* native_memo.c: simulations kept across the GPU counts of a sweep (native_options.sim_memo):
 * the same plan on the same devices of a cluster resized to another count simulates alike,
 * so its figures are looked up by a key of everything the simulator reads of the plan and
 * its devices (native_impl.h, nm_sim_memo_new). */
#include "planner/native_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine.h" /* sim_net: the levels' group sizes as the simulator has them */

#define MEMO_SLOTS 64 /* the latest keys kept: a plan recurs at nearby counts */

typedef struct memo_entry {
    unsigned char *key;
    size_t len;
    uint64_t hash;
    nm_sim_fig fig;
} memo_entry;

struct nm_sim_memo {
    memo_entry e[MEMO_SLOTS];
    int next;                 /* the slot the next entry replaces */
    unsigned char *buf;       /* the key being built */
    size_t len, cap;
    int oom;
};

nm_sim_memo *nm_sim_memo_new(void) { return calloc(1, sizeof(nm_sim_memo)); }

static void fig_free(nm_sim_fig *f)
{
    free(f->dev);
    free(f->dev_mem);
    memset(f, 0, sizeof *f);
}

void nm_sim_memo_free(nm_sim_memo *mo)
{
    if (!mo) return;
    for (int i = 0; i < MEMO_SLOTS; i++) {
        free(mo->e[i].key);
        fig_free(&mo->e[i].fig);
    }
    free(mo->buf);
    free(mo);
}

static void put(nm_sim_memo *mo, const void *p, size_t n)
{
    if (mo->oom) return;
    if (mo->len + n > mo->cap) {
        size_t nc = mo->cap ? 2 * mo->cap : 4096;
        while (nc < mo->len + n) nc *= 2;
        unsigned char *b = realloc(mo->buf, nc);
        if (!b) {
            mo->oom = 1;
            return;
        }
        mo->buf = b;
        mo->cap = nc;
    }
    memcpy(mo->buf + mo->len, p, n);
    mo->len += n;
}

static void put_int(nm_sim_memo *mo, long long v) { put(mo, &v, sizeof v); }
static void put_num(nm_sim_memo *mo, double v) { put(mo, &v, sizeof v); }

/* Each figure of device type t the simulator reads (core/device.h: its roofline's peaks
 * and efficiencies, gemm_fp8 among them, its multiply's tiling, its cores); NULL: none. */
static void put_type(nm_sim_memo *mo, const device_type *t)
{
    if (!t) {
        put_int(mo, -1);
        return;
    }
    const char *name = t->name ? t->name : "";
    put(mo, name, strlen(name) + 1);
    double v[] = {t->memory_bytes, t->speed, t->peak_flops, t->memory_Bps, t->eff.gemm,
                  t->eff.attention, t->eff.memory, t->eff.kernel_overhead_s, t->eff.gemm_fp8};
    put(mo, v, sizeof v);
    put(mo, t->peak_flops_prec, sizeof t->peak_flops_prec);
    /* the multiply's tiles and waves (device_gemm_s reads them, as gemm_fp8) */
    long long g[] = {t->tiling.sms, t->tiling.tile_m, t->tiling.tile_n, t->cores};
    put(mo, g, sizeof g);
}

/* Builds pl's key in mo->buf (the options o contribute what the scoring reads). */
static void build_key(nm_sim_memo *mo, const plan *pl, const native_options *o)
{
    mo->len = 0;
    mo->oom = 0;
    long long f[] = {pl->schedule, pl->chunks, pl->microbatch_size, pl->microbatches,
                     pl->recompute, pl->checkpoint_layers, pl->tp, pl->sequence_parallel,
                     pl->zero, pl->precision, pl->optimizer, pl->nstages, o->sim_iterations,
                     pl->p2p_sync, pl->grad_sync_end, pl->overlap_param_gather};
    put(mo, f, sizeof f);
    put_num(mo, o->memory_limit_bytes);
    const cluster *c = pl->clus;
    sim_net net;
    sim_net_from_cluster(&net, c, NULL);
    put_int(mo, c->nlevels);
    for (int l = 0; l < c->nlevels; l++) {
        double v[] = {c->levels[l].bandwidth_Bps, c->levels[l].latency_s, c->levels[l].egress_Bps};
        put(mo, v, sizeof v);
    }
    for (int s = 0; s < pl->nstages; s++) {
        const plan_stage *st = &pl->stages[s];
        put_int(mo, st->first_layer);
        put_int(mo, st->last_layer);
        put_int(mo, st->replicas);
        for (int j = 0; j < st->replicas; j++) {
            int d = st->devices[j];
            put_int(mo, d);
            /* its group at every level: which links its transfers cross, which ports and
             * cores it shares */
            for (int l = 0; l < net.nlevels; l++) put_int(mo, d / net.gsize[l]);
            put_type(mo, cluster_device_type(c, d));
        }
    }
}

static uint64_t hash_of(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

const nm_sim_fig *nm_sim_memo_get(nm_sim_memo *mo, const plan *pl, const native_options *o)
{
    build_key(mo, pl, o);
    if (mo->oom) return NULL;
    uint64_t h = hash_of(mo->buf, mo->len);
    for (int i = 0; i < MEMO_SLOTS; i++) {
        const memo_entry *e = &mo->e[i];
        if (e->key && e->hash == h && e->len == mo->len && !memcmp(e->key, mo->buf, mo->len))
            return &e->fig;
    }
    return NULL;
}

void nm_sim_memo_put(nm_sim_memo *mo, const nm_sim_fig *fig)
{
    if (mo->oom || !mo->len) return;
    memo_entry *e = &mo->e[mo->next];
    unsigned char *key = malloc(mo->len);
    int *dev = malloc(((size_t)fig->ndev + 1) * sizeof *dev);
    double *mem = malloc(((size_t)fig->ndev + 1) * sizeof *mem);
    if (!key || !dev || !mem) {
        free(key);
        free(dev);
        free(mem);
        return;
    }
    free(e->key);
    fig_free(&e->fig);
    memcpy(key, mo->buf, mo->len);
    e->key = key;
    e->len = mo->len;
    e->hash = hash_of(key, mo->len);
    e->fig = *fig;
    memcpy(dev, fig->dev, (size_t)fig->ndev * sizeof *dev);
    memcpy(mem, fig->dev_mem, (size_t)fig->ndev * sizeof *mem);
    e->fig.dev = dev;
    e->fig.dev_mem = mem;
    mo->next = (mo->next + 1) % MEMO_SLOTS;
}
