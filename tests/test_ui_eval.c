/* test_ui_eval.c: the dashboard's evaluation helpers: the even split (balanced, covering,
 * valid plans for every schedule), the cluster what-ifs (resizing along the hierarchy,
 * bandwidth factors, heterogeneous servers), and the evaluation of a what-if on a profile
 * and cluster (the plan validates, the report is there, the cache answers repeats), and
 * re-planning under a plan file's runtime and ZeRO stage (as plumb plan -p --p2p sync and
 * --zero 1 plan), and a transformer's what-ifs laid out with their context parallelism (as
 * plumb plan --model --cp lays them out), and with FP8 primary weights and Megatron-Core's
 * uneven splits, from the command line or a plan file (as plan --model lays them out); a
 * plan file that names its model opens as ui --model and every key re-plans it so. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/device.h"
#include "core/schedule_traits.h"
#include "ui/eval.h"
#include "planner/llm_profile.h"
#include "planner/native.h"
#include "planner/policy.h"
#include "tests/planfix.h"
#include "tests/tmpdir.h"

#define PROFILE "profiles/pipedream/vgg16.json"
#define CLUSTER "profiles/clusters/cluster-a-4x4.json"
#define HETERO "profiles/clusters/hetero-2xh200-2xv100.json"
#define GPT2 "examples/llm/gpt2.json"
#define DGX_A100 "profiles/clusters/dgx-a100-80g.json"
#define LLAMA "examples/llm/nemo/llama2-7b.json"
#define DGX_H100 "profiles/clusters/dgx-h100.json"

static profile *load_prof(void)
{
    plumb_err e;
    err_clear(&e);
    profile *p = profile_load(PROFILE, &e);
    cr_assert_not_null(p, "%s", e.msg);
    return p;
}

static cluster *load_clus(const char *path)
{
    plumb_err e;
    err_clear(&e);
    cluster *c = cluster_load(path, &e);
    cr_assert_not_null(c, "%s", e.msg);
    return c;
}

static double cost(const profile *p, int a, int b)
{
    double s = 0;
    for (int i = a; i <= b; i++) s += p->layers[i].forward_ms + p->layers[i].backward_ms;
    return s;
}

Test(ui_eval, even_split_covers_and_balances)
{
    profile *p = load_prof();
    int first[64], last[64];
    for (int k = 1; k <= p->nlayers; k++) {
        cr_assert_eq(planner_split_ranges(p, k, first, last), 0);
        double worst = 0, maxl = 0;
        for (int s = 0; s < k; s++) {
            cr_assert_eq(first[s], s ? last[s - 1] + 1 : 0);
            cr_assert_geq(last[s], first[s]);
            double c = cost(p, first[s], last[s]);
            if (c > worst) worst = c;
        }
        cr_assert_eq(last[k - 1], p->nlayers - 1);
        for (int i = 0; i < p->nlayers; i++)
            if (cost(p, i, i) > maxl) maxl = cost(p, i, i);
        /* no range exceeds the even share by more than one layer */
        cr_assert_leq(worst, cost(p, 0, p->nlayers - 1) / k + maxl + 1e-9, "k=%d", k);
    }
    cr_assert_eq(planner_split_ranges(p, 0, first, last), -1);
    cr_assert_eq(planner_split_ranges(p, p->nlayers + 1, first, last), -1);
    profile_free(p);
}

Test(ui_eval, even_split_plans_validate_for_every_schedule)
{
    profile *p = load_prof();
    cluster *c = load_clus(CLUSTER);
    plumb_err e;
    for (int k = 0; k < SCHED_NKINDS; k++) {
        err_clear(&e);
        plan *pl = planner_split_plan(p, c, 0, (sched_kind)k, &e);
        cr_assert_not_null(pl, "%s: %s", sched_kind_name((sched_kind)k), e.msg);
        cr_assert_eq(plan_validate(pl, NULL, &e), 0, "%s", e.msg);
        if (sched_kind_chunked((sched_kind)k)) cr_assert_eq(pl->chunks, 2);
        else cr_assert_eq(pl->nstages * pl->stages[0].replicas, 16);
        plan_free(pl);
    }
    cluster_free(c);
    profile_free(p);
}

static ui_whatif whatif(int ngpus)
{
    ui_whatif w;
    memset(&w, 0, sizeof w);
    w.ngpus = ngpus;
    w.schedule = SCHED_1F1B_FLUSH;
    w.microbatches = 8;
    w.straggler = -1;
    w.straggler_factor = 2;
    return w;
}

/* The dashboard's result of what-if w on b; fails the test with the case's index layout
 * (-1: none) and the refusal's line when it has none. The caller frees it with
 * ui_result_free. */
static ui_result evaluate(const ui_base *b, const ui_whatif *w, int layout)
{
    ui_result r = { 0 };
    cr_assert_eq(ui_evaluate(b, w, &r), 0, "layout %d: %s", layout, r.err);
    return r;
}

Test(ui_eval, cluster_whatifs_follow_the_hierarchy)
{
    cluster *base = load_clus(CLUSTER); /* 4 per server x 4 servers */
    plumb_err e;
    err_clear(&e);
    static const int n[] = { 1, 2, 4, 8, 16, 64 };
    static const int per[] = { 1, 2, 4, 4, 4, 4 }, servers[] = { 1, 1, 1, 2, 4, 16 };
    for (int i = 0; i < 6; i++) {
        ui_whatif w = whatif(n[i]);
        cluster *c = ui_cluster_whatif(base, &w, &e);
        cr_assert_not_null(c, "%d: %s", n[i], e.msg);
        cr_assert_eq(c->ndevices, n[i]);
        cr_assert_eq(c->levels[0].count, per[i]);
        cr_assert_eq(c->nservers, servers[i]);
        cluster_free(c);
    }
    /* not whole servers: the sweep's rule, the last server full and its extra devices idle */
    ui_whatif w = whatif(6);
    cluster *c6 = ui_cluster_whatif(base, &w, &e);
    cr_assert_not_null(c6, "%s", e.msg);
    cr_assert_eq(c6->ndevices, 8);
    cr_assert_eq(c6->nservers, 2);
    cluster_free(c6);
    w = whatif(0);
    cr_assert_null(ui_cluster_whatif(base, &w, &e));
    cr_assert(strstr(e.msg, "GPU count"), "%s", e.msg);
    w = whatif(16);
    w.bw_exp[1] = 2;
    w.bw_exp[0] = -1;
    cluster *c = ui_cluster_whatif(base, &w, &e);
    cr_assert_float_eq(c->levels[1].bandwidth_Bps, 4 * base->levels[1].bandwidth_Bps, 1e-6);
    cr_assert_float_eq(c->levels[1].egress_Bps, 4 * base->levels[1].egress_Bps, 1e-6);
    cr_assert_float_eq(c->levels[0].bandwidth_Bps, base->levels[0].bandwidth_Bps / 2, 1e-6);
    cluster_free(c);
    cluster_free(base);

    cluster *h = load_clus(HETERO); /* 8 per server; servers H200, H200, V100, V100 */
    w = whatif(64);
    c = ui_cluster_whatif(h, &w, &e);
    cr_assert_not_null(c, "%s", e.msg);
    cr_assert_eq(c->nservers, 8);
    for (int s = 0; s < 8; s++) cr_assert_eq(c->server_type[s], h->server_type[s % 4]);
    cluster_free(c);
    cluster_free(h);
}

Test(ui_eval, evaluate_plans_simulates_and_caches)
{
    ui_base b;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_base_load(&b, PROFILE, CLUSTER, NULL, &e), 0, "%s", e.msg);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert_eq(w.ngpus, 16);
    cr_assert_eq(w.microbatches, 0); /* the planner chooses */
    ui_result r;
    memset(&r, 0, sizeof r);
    w.microbatches = 16;
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_eq(plan_validate(r.pl, NULL, &e), 0, "%s", e.msg);
    cr_assert_not_null(r.rep->tl);
    cr_assert_gt(r.rep->samples_per_s, 0);
    /* data parallelism of VGG-16 with momentum at the profiled 128 samples per microbatch
     * needs 18.4 GiB of these V100s' 15: no baseline (0); at 64 it needs 10.0 GiB and fits */
    plan *dp = plan_clone(r.pl);
    cr_assert_not_null(dp);
    dp->optimizer = OPT_MOMENTUM;
    dp->microbatch_size = 128;
    cr_assert_eq(ui_dp_samples_per_s(dp, 0, &r.opt), 0);
    dp->microbatch_size = 64;
    cr_assert_gt(ui_dp_samples_per_s(dp, 0, &r.opt), 0);
    plan_free(dp);
    cr_assert_eq(r.dp_samples_per_s, ui_dp_samples_per_s(r.pl, w.ngpus, &r.opt), "the cached baseline");
    cr_assert_eq(r.pl->pred_samples_per_s, r.rep->samples_per_s);
    cr_assert_str_eq(r.origin, "native planner");
    cr_assert_gt(r.plan_ms, 0);
    w.straggler = 3; /* a simulator what-if: the cached plan answers */
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_eq(r.plan_ms, 0);
    cr_assert_eq(r.opt.straggler_device, 3);
    w.schedule = SCHED_ZB_V; /* not planned by the native planner: the even split */
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "even split");
    b.planner = UI_PLANNER_EVEN;
    w.schedule = SCHED_GPIPE;
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "even split");
    cr_assert_eq(r.pl->nstages, 16);
    ui_result_free(&r);
    ui_base_free(&b);
    cr_assert_eq(ui_planner_parse("pipedream"), UI_PLANNER_PIPEDREAM);
    cr_assert_eq(ui_planner_parse("nope"), -1);
}

#define PLAN_1F1B "examples/plans/vgg16-4stage-1f1b.json"

/* A loaded plan is shown as written only on the cluster it was loaded with: a memory limit
 * or a bandwidth change re-plans through the planner (as plumb plan would), so the plan
 * shown is made for the cluster shown and fits its memory. */
Test(ui_eval, loaded_plan_is_replanned_when_the_cluster_changes)
{
    ui_base b;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_base_load(&b, NULL, NULL, PLAN_1F1B, &e), 0, "%s", e.msg);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    ui_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "plan file");
    double loaded_peak = r.rep->peak_memory_bytes;
    w.straggler = 1; /* a simulator what-if keeps the plan */
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "plan file");
    w.straggler = -1;
    w.mem_limit_bytes = 6.0 * 1024 * 1024 * 1024; /* x x x on its 16 GiB V100s */
    cr_assert_lt(w.mem_limit_bytes, loaded_peak, "the loaded plan must not fit the limit");
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "native planner", "%s", r.note);
    cr_assert(r.rep->fits, "peak %.3g bytes", r.rep->peak_memory_bytes);
    cr_assert_leq(r.rep->peak_memory_bytes, w.mem_limit_bytes);
    w.recompute = UI_RECOMPUTE_AUTO; /* then r: still planned, still fits */
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "native planner", "%s", r.note);
    cr_assert(r.rep->fits);
    w.mem_limit_bytes = 0;
    w.recompute = b.loaded->recompute;
    w.bw_exp[b.clus->nlevels - 1] = 1; /* a faster network: planned for it */
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "native planner");
    w.bw_exp[b.clus->nlevels - 1] = 0; /* back to the loaded cluster: the file again */
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "plan file");
    ui_result_free(&r);
    ui_base_free(&b);
}

/* A plan file with full recomputation's checkpoints (checkpoint_layers 2) shown with
 * another recompute (`r`): the interval is full's own, so the plan shown has none (a plan
 * holding one under recompute none is refused: plan_checkpoint_check), and back at full the
 * file's 2 again. */
Test(ui_eval, loaded_checkpoints_go_with_full_recompute)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = plan_load(PLAN_1F1B, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    pl->recompute = RECOMPUTE_FULL, pl->checkpoint_layers = 2;
    char path[96];
    snprintf(path, sizeof path, "/tmp/plumb-test-ui-ckpt-%d.json", (int)getpid());
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    plan_free(pl);
    ui_base b;
    cr_assert_eq(ui_base_load(&b, NULL, NULL, path, &e), 0, "%s", e.msg);
    unlink(path);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    ui_result r;
    memset(&r, 0, sizeof r);
    int kinds[] = {RECOMPUTE_NONE, RECOMPUTE_FULL}, want[] = {0, 2};
    for (int i = 0; i < 2; i++) {
        w.recompute = kinds[i];
        cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "recompute %d: %s", kinds[i], r.err);
        cr_assert_str_eq(r.origin, "plan file");
        cr_expect_eq(r.pl->recompute, kinds[i]);
        cr_expect_eq(r.pl->checkpoint_layers, want[i], "recompute %d", kinds[i]);
    }
    ui_result_free(&r);
    ui_base_free(&b);
}

/* The stages of a and b (layers, replicas, devices) are the same. */
static int same_stages(const plan *a, const plan *b)
{
    if (a->nstages != b->nstages) return 0;
    for (int s = 0; s < a->nstages; s++) {
        const plan_stage *x = &a->stages[s], *y = &b->stages[s];
        if (x->first_layer != y->first_layer || x->last_layer != y->last_layer ||
            x->replicas != y->replicas)
            return 0;
        for (int j = 0; j < x->replicas; j++)
            if (x->devices[j] != y->devices[j]) return 0;
    }
    return 1;
}

/* Opens in b, as the dashboard opens a plan file, PROFILE's four-stage 1F1B plan on
 * CLUSTER (stages of layers 0-3, 4-10, 11-17 on devices 0, 1, 2) with `fields` (its
 * microbatches, recompute, optimizer and runtime: JSON members, each followed by ", ") and
 * `last`, its last stage's (layers 18-40) replicas and devices, written to a temporary file
 * named for tag and removed; fails the test when it is refused. */
static void open_vgg_plan(ui_base *b, const char *tag, const char *fields, const char *last)
{
    char path[128], cwd[256];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    snprintf(path, sizeof path, "/tmp/plumb-test-ui-%s-%d.json", tag, (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"format\": \"plumb-plan/1\", \"profile\": \"%s/" PROFILE "\", "
               "\"cluster\": \"%s/" CLUSTER "\", \"schedule\": \"1f1b-flush\", "
               "%s\"stages\": ["
               "{\"first_layer\": 0, \"last_layer\": 3, \"replicas\": 1, \"devices\": [0]}, "
               "{\"first_layer\": 4, \"last_layer\": 10, \"replicas\": 1, \"devices\": [1]}, "
               "{\"first_layer\": 11, \"last_layer\": 17, \"replicas\": 1, \"devices\": [2]}, "
               "{\"first_layer\": 18, \"last_layer\": 40, %s}]}\n",
            cwd, cwd, fields, last);
    fclose(f);
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_base_load(b, NULL, NULL, path, &e), 0, "%s: %s", tag, e.msg);
    unlink(path);
}

/* A plan file's runtime ("p2p": "sync") is the native planner's when the dashboard
 * re-plans: on PLAN_1F1B with p2p sync on 8 GPUs (`- -`) it shows the plan `plumb plan -p
 * vgg16 -c cluster-a-4x4 --gpus 8 --schedule 1f1b-flush --microbatches 8
 * --microbatch-size 32 --no-recompute --p2p sync` makes (1 stage on 4 devices, 749.2
 * samples/s), not the one ranked under overlap (2 stages, 569.7 samples/s under sync). */
Test(ui_eval, replanning_ranks_under_the_plan_files_runtime)
{
    ui_base b;
    open_vgg_plan(&b, "p2p", "\"microbatch_size\": 32, \"microbatches\": 8, \"recompute\": false, "
                  "\"optimizer\": \"momentum\", \"p2p\": \"sync\", ",
                  "\"replicas\": 1, \"devices\": [3]");
    plumb_err e;
    err_clear(&e);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert_eq(w.p2p_sync, 1);
    w.ngpus = 8;
    ui_result r = evaluate(&b, &w, -1);
    cr_assert_str_eq(r.origin, "native planner", "%s", r.note);
    cr_assert(r.pl->p2p_sync);

    /* plumb plan -p's options for the same what-if, under either runtime */
    cluster *c = load_clus(CLUSTER);
    cluster *c8 = cluster_take_gpus(c, 8, CLUSTER, &e);
    cr_assert_not_null(c8, "%s", e.msg);
    native_options o;
    native_options_init(&o);
    o.schedule = SCHED_1F1B_FLUSH;
    o.microbatches = 8;
    o.microbatch_size = 32;
    o.recompute = 0;
    o.p2p_sync = 1;
    plan *sync = planner_native(b.prof, c8, &o, NULL, &e);
    cr_assert_not_null(sync, "%s", e.msg);
    o.p2p_sync = 0;
    plan *overlap = planner_native(b.prof, c8, &o, NULL, &e);
    cr_assert_not_null(overlap, "%s", e.msg);
    cr_assert(!same_stages(sync, overlap), "the runtime must change the plan here");
    cr_assert(same_stages(r.pl, sync), "%d stages, plumb plan --p2p sync's %d",
              r.pl->nstages, sync->nstages);
    cr_assert_eq(r.pl->microbatches, sync->microbatches);
    cr_assert_float_eq(r.rep->samples_per_s, sync->pred_samples_per_s,
                       1e-6 * sync->pred_samples_per_s);
    plan_free(overlap);
    plan_free(sync);
    cluster_free(c8);
    cluster_free(c);
    ui_result_free(&r);
    ui_base_free(&b);
}

/* A plan file's ZeRO-1 ("zero": 1) is the native planner's too when the dashboard re-plans:
 * VGG-16 on cluster-a-4x4 at 1 GiB per device (`x` what-ifs) fits only with the optimizer
 * state split over the replicas (node35's weights, gradient and momentum take 1.15 GiB),
 * so the re-planned plan is `plumb plan -p vgg16 -c cluster-a-4x4 --memory-limit 1
 * --microbatch-size 8 --microbatches 64 --recompute --zero 1`'s (4 stages, 1135.2
 * samples/s), keeps zero 1 and fits; without the file's zero the planner finds nothing
 * and the even split is shown. */
Test(ui_eval, replanning_keeps_the_plan_files_zero)
{
    ui_base b;
    open_vgg_plan(&b, "zero", "\"microbatch_size\": 8, \"microbatches\": 64, \"recompute\": true, "
                  "\"optimizer\": \"momentum\", \"zero\": 1, ",
                  "\"replicas\": 2, \"devices\": [3, 4]");
    plumb_err e;
    err_clear(&e);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert_eq(w.zero, 1);
    w.mem_limit_bytes = 1073741824.0;
    ui_result r = evaluate(&b, &w, -1);
    cr_assert_str_eq(r.origin, "native planner", "%s", r.note);
    cr_assert_eq(r.pl->zero, 1);
    cr_expect(r.rep->fits, "peak %.0f bytes", r.rep->peak_memory_bytes);

    cluster *c = load_clus(CLUSTER);
    native_options o;
    native_options_init(&o);
    o.memory_limit_bytes = 1073741824.0;
    o.microbatch_size = 8;
    o.microbatches = 64;
    o.recompute = 1;
    o.zero = 1;
    plan *z = planner_native(b.prof, c, &o, NULL, &e);
    cr_assert_not_null(z, "%s", e.msg);
    cr_assert(same_stages(r.pl, z), "%d stages, plumb plan --zero 1's %d", r.pl->nstages,
              z->nstages);
    cr_assert_float_eq(r.rep->samples_per_s, z->pred_samples_per_s,
                       1e-6 * z->pred_samples_per_s);
    plan_free(z);
    cluster_free(c);
    ui_result_free(&r);
    ui_base_free(&b);
}

/* 1024 GPUs are planned on as they are; beyond UI_MAX_GPUS the dashboard says it cuts. */
Test(ui_eval, large_clusters_are_not_cut_silently)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/plumb-test-ui-big-%d.json", (int)getpid());
    for (int servers = 128; servers <= 1024; servers *= 8) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fprintf(f, "{\"format\": \"plumb-cluster/1\", \"name\": \"big\", \"levels\": ["
                   "{\"name\": \"nvlink\", \"count\": 8, \"bandwidth_gbit_per_s\": 3600, \"latency_us\": 3},"
                   "{\"name\": \"ib\", \"count\": %d, \"bandwidth_gbit_per_s\": 400, \"latency_us\": 5}],"
                   "\"device_types\": [{\"name\": \"H200\", \"memory_gib\": 135, \"speed\": 4}],"
                   "\"device_type\": \"H200\"}\n", servers);
        fclose(f);
        ui_base b;
        plumb_err e;
        err_clear(&e);
        cr_assert_eq(ui_base_load(&b, PROFILE, path, NULL, &e), 0, "%s", e.msg);
        ui_whatif w;
        ui_base_whatif(&b, &w);
        char note[PLUMB_ERR_MAX];
        int cut = ui_base_cut_note(&b, note, sizeof note);
        if (servers * 8 <= UI_MAX_GPUS) {
            cr_assert_eq(w.ngpus, servers * 8);
            cr_assert_eq(cut, 0);
            cr_assert_str_eq(note, "");
        } else {
            cr_assert_eq(w.ngpus, UI_MAX_GPUS);
            cr_assert_eq(cut, 1);
            char want[64];
            snprintf(want, sizeof want, "%d GPUs", servers * 8);
            cr_assert(strstr(note, want), "%s", note);
        }
        ui_base_free(&b);
    }
    unlink(path);
}

/* search3d_options_from_layout copies every field a fixed layout fixes (each set to a
 * value unlike its default here) and nothing else; the dashboard's runtime options (the
 * check of every what-if) are that copy, so they describe one fixed layout
 * (search3d_all_fixed), as `plumb plan --model --tp --pp --dp` gives its check. */
Test(ui_eval, runtime_options_are_the_fixed_layout)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 16, o.tp = 2, o.pp = 4, o.dp = 2, o.global_batch = 64;
    o.microbatch_size = 4, o.interleave = 3, o.recompute = RECOMPUTE_FULL;
    o.checkpoint_layers = 2, o.sequence_parallel = 1, o.zero = 1;
    o.precision = DEV_BF16, o.schedule = SCHED_INTERLEAVED, o.seq = 512, o.balance = 1;
    o.attention = LLM_ATTN_FLASH, o.p2p_sync = 1;
    o.grad_reduce = DEV_BF16, o.optimizer_state = DEV_BF16;
    search3d_options so;
    memset(&so, 0x5a, sizeof so); /* initialised by the copy, not by the caller */
    search3d_options_from_layout(&o, &so);
    cr_expect_eq(so.gpus, 16);
    cr_expect_eq(so.global_batch, 64);
    cr_expect(so.tp == 2 && so.pp == 4 && so.dp == 2);
    cr_expect_eq(so.microbatch_size, 4);
    cr_expect_eq(so.interleave, 3);
    cr_expect_eq(so.recompute, RECOMPUTE_FULL);
    cr_expect_eq(so.checkpoint_layers, 2);
    cr_expect_eq(so.sequence_parallel, 1);
    cr_expect_eq(so.zero, 1);
    cr_expect_eq(so.schedule, SCHED_INTERLEAVED);
    cr_expect_eq(so.precision, DEV_BF16);
    cr_expect_eq(so.grad_reduce, DEV_BF16);
    cr_expect_eq(so.optimizer_state, DEV_BF16);
    cr_expect_eq(so.seq, 512);
    cr_expect_eq(so.attention, LLM_ATTN_FLASH);
    cr_expect_eq(so.p2p_sync, 1);
    cr_expect_eq(so.balance, 1);
    cr_expect_eq(so.simulate, 0);
    cr_expect_eq(so.tp_overlap, TP_OVERLAP_NONE);
    cr_expect_eq(so.overlap_param_gather, 0);
    cr_expect(search3d_all_fixed(&so));
    layout3d_options_init(&o); /* layout3d's defaults: the schedule left to the layout */
    search3d_options_from_layout(&o, &so);
    cr_expect_eq(so.schedule, SEARCH3D_FREE);
    cr_expect_eq(so.sequence_parallel, 0);
    cr_expect_eq(so.zero, 0);

    /* the dashboard's base: the layout as opened, at its resolved tp */
    layout3d_options_init(&o);
    o.pp = 2, o.dp = 2, o.gpus = 8, o.global_batch = 16, o.microbatch_size = 2;
    o.interleave = 1, o.sequence_parallel = 1, o.zero = 1;
    ui_runtime rt = { TP_OVERLAP_FULL, 1, 0 };
    ui_base b;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_base_load_model(&b, "examples/llm/gpt2.json",
                                    "profiles/clusters/dgx-a100-80g.json", &o, &rt, &e), 0,
                 "%s", e.msg);
    cr_expect_eq(b.rt.tp, 2, "the resolved tp");
    cr_expect_eq(b.rt.microbatch_size, 2);
    cr_expect_eq(b.rt.sequence_parallel, 1);
    cr_expect_eq(b.rt.zero, 1);
    cr_expect_eq(b.rt.tp_overlap, TP_OVERLAP_FULL);
    cr_expect_eq(b.rt.overlap_param_gather, 1);
    cr_expect(search3d_all_fixed(&b.rt), "the opened layout is one fixed layout");
    ui_base_free(&b);
}

/* layout3d's defaults at tp x pp x dp on gpus GPUs, a global batch of 16 and microbatches
 * of 1: the layout the transformer cases below start from. */
static layout3d_options layout(int tp, int pp, int dp, int gpus)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = tp, o.pp = pp, o.dp = dp, o.gpus = gpus, o.global_batch = 16;
    o.microbatch_size = 1;
    return o;
}

/* Expects the dashboard's iteration got (s) to be plan --model's want within 1e-6; layout
 * is the case's index for the message (-1: none). */
static void expect_iteration_near(double got, double want, int layout)
{
    cr_expect(fabs(got / want - 1) < 1e-6, "layout %d: the dashboard %.9g s, plan --model "
              "%.9g s", layout, got, want);
}

/* Expects the dashboard's result r to simulate at plan --model's iteration time: want (the
 * layout3d_build plan of the same layout) simulated in full, within 1e-6; layout is the
 * case's index for the message (-1: none). */
static void expect_iteration_of(const ui_result *r, const plan *want, int layout)
{
    plumb_err e;
    err_clear(&e);
    sim_options so;
    sim_options_init(&so);
    sim_report *rep = sim_run(want, &so, &e);
    cr_assert_not_null(rep, "%s", e.msg);
    expect_iteration_near(r->rep->iteration_s, rep->iteration_s, layout);
    sim_report_free(rep);
}

/* plumb ui --model examples/llm/gpt2.json on dgx-a100-80g.json with layout o: the base in
 * b (the caller frees it with ui_base_free); fails the test when it is refused. */
static void open_gpt2(ui_base *b, const layout3d_options *o)
{
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_base_load_model(b, GPT2, DGX_A100, o, NULL, &e), 0, "%s", e.msg);
}

/* plumb ui --model llama2-7b.json on dgx-h100.json with layout o and runtime rt: the base
 * in b (the caller frees it with ui_base_free); fails the test when it is refused. */
static void open_llama(ui_base *b, const layout3d_options *o, const ui_runtime *rt)
{
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_base_load_model(b, LLAMA, DGX_H100, o, rt, &e), 0, "%s", e.msg);
}

/* Sets what-if w and a copy of o (returned) to tp x dp over o's pp, on tp * pp * dp GPUs:
 * the same layout for the dashboard and for plan --model. */
static layout3d_options both_at(const layout3d_options *o, ui_whatif *w, int tp, int dp)
{
    layout3d_options p = *o;
    w->tp = p.tp = tp;
    w->dp = p.dp = dp;
    w->ngpus = p.gpus = tp * o->pp * dp;
    return p;
}

/* Context parallelism (plumb ui --model --cp): the opened layout's cp is the what-if's, and
 * every what-if lays out with its own cp, as `plumb plan --model --cp` lays it out (the
 * same plan, simulated to the same iteration time); cp 1 is the layout without it. */
Test(ui_eval, context_parallel_layouts_carry_their_cp)
{
    layout3d_options o = layout(2, 2, 2, 16);
    o.cp = 2, o.attention = LLM_ATTN_FLASH;
    ui_base b;
    plumb_err e;
    err_clear(&e);
    open_gpt2(&b, &o);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert(w.cp == 2 && w.ngpus == 16 && w.dp == 2, "cp %d gpus %d dp %d", w.cp, w.ngpus,
              w.dp);
    layout3d_options lo = ui_whatif_layout3d(&b.lopt, &w);
    cr_assert_eq(lo.cp, 2);
    /* the opened layout, then tp 4 x cp 2 x pp 2 x dp 1, then cp 4, then cp 1 (dp 4) */
    static const struct { int tp, cp, dp; } L[] = { { 2, 2, 2 }, { 4, 2, 1 }, { 2, 4, 1 },
                                                    { 2, 1, 4 } };
    double iter[4];
    for (int i = 0; i < 4; i++) {
        w.tp = L[i].tp, w.cp = L[i].cp, w.dp = L[i].dp;
        ui_result r = evaluate(&b, &w, i);
        cr_expect_eq(r.pl->cp > 1 ? r.pl->cp : 1, L[i].cp, "layout %d: plan cp %d", i, r.pl->cp);
        cr_expect_eq(r.pl->tp, L[i].tp);
        cr_expect_eq(r.rep->gpus, 16, "layout %d: %d GPUs", i, r.rep->gpus);
        /* plan --model's plan of the same layout, simulated in full */
        layout3d_options p = o;
        p.tp = L[i].tp, p.cp = L[i].cp, p.dp = L[i].dp;
        plan *pl = layout3d_build(b.model, b.clus, "dgx-a100-80g.json", &p, &e);
        cr_assert_not_null(pl, "%s", e.msg);
        expect_iteration_of(&r, pl, i);
        iter[i] = r.rep->iteration_s;
        plan_free(pl);
        ui_result_free(&r);
    }
    cr_expect(iter[0] != iter[3], "cp 2 and cp 1 price alike: the check cannot fail");
    ui_base_free(&b);
}

/* Plan --model's plan of layout o with FP8 primary weights fp8pg (set on the built plan,
 * as cli/cmd_plan_layout.c sets it), simulated in full: its iteration seconds, and its
 * largest device peak into *peak (may be NULL). */
static double plan_model_run(const ui_base *b, const layout3d_options *o, int fp8pg,
                             double *peak)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = layout3d_build(b->model, b->clus, "cluster.json", o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    pl->fp8_param_gather = fp8pg;
    sim_options so;
    sim_options_init(&so);
    sim_report *rep = sim_run(pl, &so, &e);
    cr_assert_not_null(rep, "%s", e.msg);
    double it = rep->iteration_s;
    if (peak) *peak = rep->peak_memory_bytes;
    sim_report_free(rep);
    plan_free(pl);
    return it;
}

/* Megatron-Core's uneven split (plumb ui --model --decoder-first-pipeline-num-layers 4):
 * every what-if lays out with it, as plan --model lays the same layout out (rank 0 holds
 * the embedding and 4 blocks, rank 1 the other 8 and the head), to the same iteration;
 * the even split prices otherwise. */
Test(ui_eval, uneven_split_rides_every_layout)
{
    layout3d_options o = layout(2, 2, 2, 8);
    o.split.first_blocks = 4;
    ui_base b;
    open_gpt2(&b, &o);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    static const struct { int tp, dp, mbs; } L[] = { { 2, 2, 1 }, { 2, 4, 1 }, { 1, 4, 2 } };
    for (int i = 0; i < 3; i++) {
        layout3d_options p = both_at(&o, &w, L[i].tp, L[i].dp);
        w.mbs = p.microbatch_size = L[i].mbs;
        ui_result r = evaluate(&b, &w, i);
        cr_expect(r.pl->nstages == 2 && r.pl->stages[0].last_layer == 4 &&
                  r.pl->stages[1].first_layer == 5, "layout %d: stage 0 ends at layer %d", i,
                  r.pl->stages[0].last_layer);
        expect_iteration_near(r.rep->iteration_s, plan_model_run(&b, &p, 0, NULL), i);
        p.split.first_blocks = 0;
        cr_expect(fabs(r.rep->iteration_s / plan_model_run(&b, &p, 0, NULL) - 1) > 1e-3,
                  "layout %d: the even split prices alike: the check cannot fail", i);
        ui_result_free(&r);
    }
    ui_base_free(&b);
}

/* FP8 primary weights (plumb ui --model --fp8-param-gather): every what-if's layout has
 * them, as plan --model --fp8-param-gather builds it, at the same iteration and peak,
 * lower than without them. */
Test(ui_eval, fp8_param_gather_rides_every_layout)
{
    layout3d_options o = layout(2, 2, 2, 8);
    o.precision = DEV_FP8, o.zero = 1, o.seq = 1024;
    ui_runtime rt = { 0, 0, 1 };
    ui_base b;
    open_llama(&b, &o, &rt);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert_eq(w.fp8pg, 1);
    static const struct { int tp, dp; } L[] = { { 2, 2 }, { 2, 4 }, { 1, 4 } };
    for (int i = 0; i < 3; i++) {
        layout3d_options p = both_at(&o, &w, L[i].tp, L[i].dp);
        ui_result r = evaluate(&b, &w, i);
        cr_expect(r.pl->fp8_param_gather, "layout %d dropped fp8_param_gather", i);
        double peak, want = plan_model_run(&b, &p, 1, &peak);
        expect_iteration_near(r.rep->iteration_s, want, i);
        cr_expect(fabs(r.rep->peak_memory_bytes / peak - 1) < 1e-9, "layout %d: peak %.0f, "
                  "plan --model %.0f", i, r.rep->peak_memory_bytes, peak);
        double without;
        plan_model_run(&b, &p, 0, &without);
        cr_expect(without > peak * 1.01, "layout %d: peak %.0f without them, %.0f with: the "
                  "check cannot fail", i, without, peak);
        ui_result_free(&r);
    }
    ui_base_free(&b);
}

/* Transformer Engine's fused loss (plumb ui --model --cross-entropy te): every what-if's
 * layout has it ("cross_entropy" te on the plan), at the iteration of layout3d_build under
 * it and sim_run (plan --model --cross-entropy te), which the unfused loss's differs from. */
Test(ui_eval, cross_entropy_te_rides_every_layout)
{
    layout3d_options o = layout(2, 2, 2, 8);
    o.seq = 1024, o.cross_entropy = LLM_CE_TE;
    ui_runtime rt = { 0, 0, 0 };
    ui_base b;
    open_llama(&b, &o, &rt);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    static const struct { int tp, dp; } L[] = { { 2, 2 }, { 2, 4 }, { 1, 4 } };
    for (int i = 0; i < 3; i++) {
        layout3d_options p = both_at(&o, &w, L[i].tp, L[i].dp);
        ui_result r = evaluate(&b, &w, i);
        cr_expect_eq(r.pl->cross_entropy, 1, "layout %d dropped cross_entropy te", i);
        double want = plan_model_run(&b, &p, 0, NULL);
        expect_iteration_near(r.rep->iteration_s, want, i);
        p.cross_entropy = LLM_CE_UNFUSED;
        double unfused = plan_model_run(&b, &p, 0, NULL);
        cr_expect(unfused > want * 1.001, "layout %d: %.9g s unfused, %.9g s with te: the "
                  "check cannot fail", i, unfused, want);
        ui_result_free(&r);
    }
    ui_base_free(&b);
}

/* pl saved as `name` in a new temporary folder (*dir, which the test removes with rm_tree;
 * path receives the file's path) and loaded into b as the dashboard opens a plan file (the
 * caller frees b with ui_base_free); fails the test when either is refused. */
static void open_saved_plan(const plan *pl, const char *name, char **dir, char path[512],
                            ui_base *b)
{
    plumb_err e;
    err_clear(&e);
    *dir = make_tmpdir_named("uieval");
    snprintf(path, 512, "%s/%s", *dir, name);
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    cr_assert_eq(ui_base_load(b, NULL, NULL, path, &e), 0, "%s", e.msg);
}

/* pl without its model (a file that does not name it: the 2D view), saved and opened as
 * open_saved_plan saves and opens it. */
static void open_without_model(plan *pl, const char *name, char **dir, char path[512],
                               ui_base *b)
{
    plan_model_free(pl->model);
    pl->model = NULL;
    open_saved_plan(pl, name, dir, path, b);
}

/* Expects r, the dashboard's re-plan of a llama2-7b plan file at twice its microbatches, at
 * the iteration of plan --model's layout o on dgx-h100 with the global batch doubled and
 * FP8 primary weights if fp8pg. */
static void expect_doubled_batch(const ui_result *r, layout3d_options o, int fp8pg)
{
    o.global_batch *= 2;
    plan *want = plan3d(LLAMA, DGX_H100, &o);
    if (fp8pg) want->fp8_param_gather = 1;
    expect_iteration_of(r, want, -1);
    plan_free(want);
}

/* Frees b and pl and expects the temporary folder dir removed. */
static void close_saved_plan(ui_base *b, plan *pl, char *dir)
{
    ui_base_free(b);
    plan_free(pl);
    cr_expect_eq(rm_tree(dir), 0);
}

/* A plan file written by plan --model --cross-entropy te without its model, opened in the
 * dashboard (2D view): a microbatch change (the file's stages kept) keeps its
 * cross_entropy, at plan --model --cross-entropy te's iteration for the doubled global
 * batch. */
Test(ui_eval, plan_file_keeps_cross_entropy_te)
{
    layout3d_options o = layout(2, 2, 2, 8);
    o.seq = 1024, o.cross_entropy = LLM_CE_TE;
    plan *pl = plan3d(LLAMA, DGX_H100, &o);
    cr_assert_eq(pl->cross_entropy, 1);
    char *dir, path[512];
    ui_base b;
    open_without_model(pl, "te.json", &dir, path, &b);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    w.microbatches *= 2;
    ui_result r = evaluate(&b, &w, -1);
    cr_expect_eq(r.pl->cross_entropy, 1, "the re-plan dropped cross_entropy te");
    expect_doubled_batch(&r, o, 0); /* a global batch of 32 */
    ui_result_free(&r);
    close_saved_plan(&b, pl, dir);
}

/* A plan file written by plan --model --fp8-param-gather with an uneven split, without its
 * model, opened in the dashboard (2D view): the what-if starts with its FP8 primary weights, and a
 * microbatch change (the file's stages kept) keeps them and the split, at plan --model's
 * iteration for the doubled global batch. */
Test(ui_eval, plan_file_keeps_fp8_param_gather_and_its_split)
{
    layout3d_options o = layout(2, 2, 2, 8);
    o.precision = DEV_FP8, o.zero = 1, o.seq = 1024, o.split.first_blocks = 12;
    plan *pl = plan3d(LLAMA, DGX_H100, &o);
    pl->fp8_param_gather = 1;
    char *dir, path[512];
    ui_base b;
    open_without_model(pl, "fp8.json", &dir, path, &b);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert_eq(w.fp8pg, 1);
    w.microbatches *= 2;
    ui_result r = evaluate(&b, &w, -1);
    cr_expect(r.pl->fp8_param_gather, "the re-plan dropped fp8_param_gather");
    cr_expect(r.pl->stages[0].last_layer == 12, "stage 0 ends at layer %d, not 12",
              r.pl->stages[0].last_layer);
    expect_doubled_batch(&r, o, 1); /* a global batch of 32 */
    ui_result_free(&r);
    close_saved_plan(&b, pl, dir);
}

/* A plan file of a transformer's layout (plumb plan --model -o, tp 1, fp8) that does not
 * name its model (written before plan files named it) re-plans only as a layout: a what-if that would send it to the native planner (fewer GPUs) has no plan,
 * and its line names the plumb ui --model command of the file's layout (the file does not
 * name its model file); one that keeps its stages (twice the microbatches) keeps fp8. A
 * plan file of a profile (vgg16) is not a layout's. */
Test(ui_eval, transformer_plan_file_replans_only_as_a_layout)
{
    layout3d_options o = layout(1, 2, 4, 8);
    o.precision = DEV_FP8, o.seq = 1024;
    plumb_err e;
    err_clear(&e);
    plan *pl = plan3d(LLAMA, DGX_H100, &o);
    char *dir, path[512];
    ui_base b;
    open_without_model(pl, "fp8.json", &dir, path, &b);
    cr_expect_eq(ui_base_layout_file(&b), 1);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    w.ngpus = 4;
    ui_result r = { 0 };
    cr_expect_eq(ui_evaluate(&b, &w, &r), -1, "re-planned as a %s plan",
                 r.pl ? dev_precision_name((dev_precision)r.pl->precision) : "?");
    cr_expect_null(r.pl);
    cr_expect(strstr(r.err, "a transformer's layout (llama2-7b, fp8) is re-planned only as a "
                            "layout; its plan file does not name its model: plumb ui --model "
                            "FILE -c CLUSTER --tp 1 --pp 2 --dp 4 --global-batch 16 "
                            "--precision fp8 --seq-len 1024"), "%s", r.err);
    ui_result_free(&r);
    ui_base_whatif(&b, &w);
    w.microbatches *= 2;
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_expect_eq(r.pl->precision, DEV_FP8);
    cr_expect(r.rep->mfu > 0.2 && r.rep->mfu < 0.8, "MFU %g", r.rep->mfu);
    ui_result_free(&r);
    ui_base_free(&b);
    cr_assert_eq(ui_base_load(&b, NULL, NULL, "examples/plans/vgg16-hybrid-pipedream.json", &e),
                 0, "%s", e.msg);
    cr_expect_eq(ui_base_layout_file(&b), 0);
    close_saved_plan(&b, pl, dir);
}

/* A plan file of plan --model with fp8, FP8 primary weights and an uneven split (rank 0
 * holding 12 blocks) names its model: it opens as plumb ui --model with the same options
 * (a 3D layout, the file's first frame at plan --model's iteration), and a dp key (4 to 2:
 * within the file's 16 devices, the cluster it embeds) and a microbatch-size key re-plan it to
 * what layout3d_build under the same options and sim_run give. Without the model (a file
 * that does not name it) the dp key has no plan. */
Test(ui_eval, plan_file_with_model_replans_as_ui_model)
{
    layout3d_options o = layout(2, 2, 4, 16);
    o.precision = DEV_FP8, o.zero = 1, o.seq = 1024, o.split.first_blocks = 12;
    plumb_err e;
    err_clear(&e);
    plan *pl = plan3d(LLAMA, DGX_H100, &o);
    pl->fp8_param_gather = 1;
    char *dir, path[512];
    ui_base b;
    open_saved_plan(pl, "model.json", &dir, path, &b);
    cr_assert_not_null(b.model, "the file's model was not taken");
    cr_expect_null(b.loaded);
    cr_expect_eq(ui_base_layout_file(&b), 0);
    cr_expect_eq(b.lopt.split.first_blocks, 12);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_expect(w.fp8pg == 1 && w.tp == 2 && w.pp == 2 && w.dp == 4 && w.zero == 1 &&
              w.ngpus == 16, "fp8pg %d tp %d pp %d dp %d zero %d gpus %d", w.fp8pg, w.tp, w.pp,
              w.dp, w.zero, w.ngpus);
    sim_options so;
    sim_options_init(&so);
    /* the first frame, then dp 2 on 8 GPUs, then microbatch size 2 */
    static const struct { int dp, mbs; } L[] = { { 4, 1 }, { 2, 1 }, { 4, 2 } };
    for (int i = 0; i < 3; i++) {
        w.dp = L[i].dp, w.mbs = L[i].mbs, w.ngpus = 2 * 2 * L[i].dp;
        ui_result r = evaluate(&b, &w, i);
        cr_expect_str_eq(r.origin, "3D layout");
        cr_expect(r.pl->fp8_param_gather && r.pl->precision == DEV_FP8, "layout %d", i);
        cr_expect(r.pl->stages[0].last_layer == 12, "layout %d: stage 0 ends at layer %d", i,
                  r.pl->stages[0].last_layer);
        layout3d_options p = o;
        p.dp = L[i].dp, p.microbatch_size = L[i].mbs, p.gpus = w.ngpus;
        plan *want = plan3d(LLAMA, DGX_H100, &p);
        want->fp8_param_gather = 1;
        expect_iteration_of(&r, want, i);
        plan_free(want);
        ui_result_free(&r);
    }
    ui_base_free(&b);
    /* the same file without its model: the dp key is refused */
    plan_model_free(pl->model);
    pl->model = NULL;
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    cr_assert_eq(ui_base_load(&b, NULL, NULL, path, &e), 0, "%s", e.msg);
    ui_base_whatif(&b, &w);
    w.dp = 2, w.ngpus = 8;
    ui_result r = { 0 };
    cr_expect_eq(ui_evaluate(&b, &w, &r), -1);
    cr_expect(strstr(r.err, "is re-planned only by plumb plan --model"), "%s", r.err);
    ui_result_free(&r);
    close_saved_plan(&b, pl, dir);
}

/* A balanced layout's file (plan --model --balance) and a cp one (--cp 2, flash) open with
 * their model and options: the first frame is plan --model's (balanced: the even split's
 * stages balanced again; cp: cp 2 kept). A file whose model does not lay out to its
 * stages is refused with one line naming the file and "model". */
Test(ui_eval, plan_file_with_model_keeps_balance_and_cp)
{
    layout3d_options o = layout(2, 2, 2, 16);
    o.cp = 2, o.attention = LLM_ATTN_FLASH;
    plumb_err e;
    err_clear(&e);
    plan *pl = plan3d(GPT2, DGX_A100, &o);
    char *dir, path[512];
    ui_base b;
    open_saved_plan(pl, "cp.json", &dir, path, &b);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_expect(b.model && w.cp == 2 && w.attention == LLM_ATTN_FLASH, "cp %d", w.cp);
    ui_result r = evaluate(&b, &w, -1);
    expect_iteration_of(&r, pl, -1);
    ui_result_free(&r);
    ui_base_free(&b);
    plan_free(pl);
    /* balanced (gpt2's 12 blocks over pp 4) */
    o = layout(1, 4, 2, 8);
    o.balance = 1;
    pl = plan3d(GPT2, DGX_A100, &o);
    cr_expect_eq(pl->model->balance, 1);
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    cr_assert_eq(ui_base_load(&b, NULL, NULL, path, &e), 0, "%s", e.msg);
    cr_expect(b.model && b.lopt.balance == 1);
    ui_base_free(&b);
    /* a model that lays out otherwise than the stages: two blocks moved from stage 1 to 0 */
    pl->stages[0].last_layer += 2;
    pl->stages[1].first_layer += 2;
    pl->model->balance = 0;
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    cr_expect_eq(ui_base_load(&b, NULL, NULL, path, &e), -1);
    char want[600];
    snprintf(want, sizeof want, "%s: model: laid out again, its stage 0 holds layers 0-3, "
             "the file's 0-5", path);
    cr_expect(strstr(e.msg, want) == e.msg, "%s", e.msg);
    plan_free(pl);
    cr_expect_eq(rm_tree(dir), 0);
}

/* A plan file of one server (plan --model -o, gpt2 tp 2 x pp 2 x dp 2 on 8 A100s) keeps the
 * level above its server (the cut counts one server there): dp doubled grows it by a second
 * server over InfiniBand, at the iteration of ui --model's (plan --model's) tp 2 x pp 2 x
 * dp 4 on the cluster file, within 1e-6 (0.02405 s on a server of 16 A100s before). A file
 * written without that level (as before) still opens and re-plans. */
Test(ui_eval, one_server_plan_file_grows_over_the_next_level)
{
    layout3d_options o = layout(2, 2, 2, 8);
    plumb_err e;
    err_clear(&e);
    plan *pl = plan3d(GPT2, DGX_A100, &o);
    cr_expect(pl->clus->nlevels == 2 && pl->clus->levels[1].count == 1,
              "the cut: %d levels", pl->clus->nlevels);
    char *dir = make_tmpdir_named("uieval"), path[512];
    snprintf(path, sizeof path, "%s/one.json", dir);
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    layout3d_options p = o;
    p.dp = 4, p.gpus = 16;
    plan *want = plan3d(GPT2, DGX_A100, &p);
    sim_options so;
    sim_options_init(&so);
    sim_report *rep = sim_run(want, &so, &e);
    cr_assert_not_null(rep, "%s", e.msg);
    for (int old = 0; old < 2; old++) {
        if (old) { /* the file as written before: the server's level alone */
            free(pl->clus->levels[1].name);
            pl->clus->levels[1].name = NULL;
            pl->clus->nlevels = 1;
            cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
        }
        ui_base b;
        cr_assert_eq(ui_base_load(&b, NULL, NULL, path, &e), 0, "%s", e.msg);
        cr_assert_not_null(b.model);
        ui_whatif w;
        ui_base_whatif(&b, &w);
        w.dp = 4, w.ngpus = 16;
        ui_result r = evaluate(&b, &w, old);
        if (!old)
            cr_expect(fabs(r.rep->iteration_s / rep->iteration_s - 1) < 1e-6,
                      "the dashboard %.9g s, ui --model on the cluster file %.9g s",
                      r.rep->iteration_s, rep->iteration_s);
        else
            cr_expect_eq(r.pl->clus->nlevels, 1, "the old file grows its server");
        ui_result_free(&r);
        ui_base_free(&b);
    }
    sim_report_free(rep);
    plan_free(want);
    plan_free(pl);
    cr_expect_eq(rm_tree(dir), 0);
}

/* The R key's interval (ui_whatif.ckpt) lays out as plan --model --checkpoint-layers K:
 * GPT-2 tp 2 x pp 2 x dp 2 with full recomputation opened with --checkpoint-layers 2, and
 * what-ifs at K 0, 3 and 6: the plan's checkpoint_layers is K, its iteration and largest
 * peak equal plan --model's within 1e-9, and the peaks differ from K 1's (the check can
 * fail). Switched to selective, the plan holds no interval. */
Test(ui_eval, checkpoint_interval_lays_out_as_plan_model)
{
    layout3d_options o = layout(2, 2, 2, 8);
    o.recompute = RECOMPUTE_FULL, o.checkpoint_layers = 2;
    ui_base b;
    open_gpt2(&b, &o);
    ui_whatif w;
    ui_base_whatif(&b, &w);
    cr_assert_eq(w.ckpt, 2, "the opened interval");
    layout3d_options p = o;
    p.checkpoint_layers = 1;
    double one_peak;
    plan_model_run(&b, &p, 0, &one_peak);
    static const int K[] = { 0, 3, 6 };
    for (int i = 0; i < 3; i++) {
        w.ckpt = K[i];
        ui_result r = evaluate(&b, &w, i);
        cr_expect_eq(r.pl->checkpoint_layers, K[i]);
        p.checkpoint_layers = K[i];
        double peak, it = plan_model_run(&b, &p, 0, &peak);
        cr_expect(fabs(r.rep->iteration_s / it - 1) < 1e-9, "K %d: %.9g against %.9g s", K[i],
                  r.rep->iteration_s, it);
        cr_expect(fabs(r.rep->peak_memory_bytes / peak - 1) < 1e-9, "K %d: peak %.9g "
                  "against %.9g", K[i], r.rep->peak_memory_bytes, peak);
        cr_expect(fabs(peak / one_peak - 1) > 1e-3, "K %d prices as K 1", K[i]);
        ui_result_free(&r);
    }
    w.recompute = RECOMPUTE_SELECTIVE;
    ui_result r = evaluate(&b, &w, -1);
    cr_expect_eq(r.pl->checkpoint_layers, 0);
    ui_result_free(&r);
    ui_base_free(&b);
}
