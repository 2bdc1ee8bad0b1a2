/* test_profiler.c: plumb profile's measurement on the CPU backend: the profile written is
 * valid and loads back identical, has one layer per top-level model layer with the spec's
 * kinds, positive times whose I/W split sums to the backward, and activation / parameter
 * bytes and FLOPs that equal the model's shapes exactly; bad settings are refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/profile.h"
#include "exec/backend.h"
#include "exec/data.h"
#include "exec/model.h"
#include "exec/profiler.h"
#include "exec/stage.h"

static const char *const mlp_spec =
    "{\"format\": \"plumb-model/1\", \"name\": \"tiny-mlp\", \"input\": [1, 6, 6],"
    " \"classes\": 5, \"seed\": 3, \"layers\": ["
    " {\"type\": \"flatten\"},"
    " {\"name\": \"fc\", \"type\": \"linear\", \"out\": 24},"
    " {\"type\": \"relu\"},"
    " {\"name\": \"fc\", \"type\": \"linear\", \"out\": 5},"
    " {\"type\": \"softmax_cross_entropy\"}]}";

static const char *const cnn_spec =
    "{\"format\": \"plumb-model/1\", \"name\": \"tiny-cnn\", \"input\": [2, 8, 8],"
    " \"classes\": 3, \"layers\": ["
    " {\"type\": \"conv2d\", \"out_channels\": 4, \"kernel\": 3, \"padding\": 1},"
    " {\"type\": \"relu\"},"
    " {\"type\": \"maxpool2d\", \"kernel\": 2},"
    " {\"type\": \"flatten\"},"
    " {\"type\": \"linear\", \"out\": 3},"
    " {\"type\": \"softmax_cross_entropy\"}]}";

static const char *const lm_spec =
    "{\"format\": \"plumb-model/1\", \"name\": \"tiny-lm\", \"input\": [8],"
    " \"classes\": 16, \"layers\": ["
    " {\"type\": \"embedding\", \"vocab\": 16, \"dim\": 12},"
    " {\"type\": \"residual\", \"layers\": [{\"type\": \"layernorm\"},"
    "   {\"type\": \"linear\", \"out\": 36}, {\"type\": \"attention\", \"heads\": 2},"
    "   {\"type\": \"linear\", \"out\": 12}]},"
    " {\"type\": \"layernorm\"}, {\"type\": \"gelu\"},"
    " {\"type\": \"linear\", \"out\": 16},"
    " {\"type\": \"softmax_cross_entropy\"}]}";

static model *parse(const char *spec)
{
    plumb_err err = {{0}};
    model *m = model_parse("spec.json", spec, &err);
    cr_assert_not_null(m, "%s", err.msg);
    return m;
}

static prof_cfg quick(int batch)
{
    prof_cfg c;
    profiler_cfg_init(&c);
    c.batch = batch;
    c.warmup = 1;
    c.runs = 3;
    return c;
}

/* Everything a measured profile of m must satisfy, whatever the timings. */
static void check_profile(const model *m, const profile *p, int batch)
{
    plumb_err err = {{0}};
    cr_assert_eq(profile_validate(p, "p", &err), 0, "%s", err.msg);
    cr_assert_eq(p->nlayers, m->nlayers);
    cr_assert_eq(p->minibatch, batch);
    cr_assert(profile_is_chain(p));
    cr_assert_str_eq(p->name, m->name);
    cr_assert_str_eq(p->device, "cpu:0");
    /* the batch gather and the three optimizer steps are measured */
    cr_assert_gt(p->input_gather_ms, 0);
    for (int k = 0; k < 3; k++) cr_assert_gt(p->step_ns_per_byte[k], 0, "optimizer %d", k);
    cr_assert(strstr(p->source, " data"), "%s", p->source);
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        const profile_layer *pl = &p->layers[i];
        cr_assert_str_eq(pl->kind, layer_kind_name(L->kind), "layer %d", i);
        double act = (double)batch * (double)shape_numel(L->out_ndim, L->out_shape) * 4;
        cr_assert_eq(pl->activation_bytes, act, "layer %d: %g bytes, expected %g", i,
                     pl->activation_bytes, act);
        cr_assert_eq(pl->parameter_bytes, (double)L->nparams * 4, "layer %d", i);
        cr_assert_eq(pl->flops, (double)batch * L->flops, "layer %d", i);
        cr_assert(pl->forward_ms > 0 && isfinite(pl->forward_ms), "layer %d: forward %g ms",
                  i, pl->forward_ms);
        cr_assert(pl->backward_ms > 0 && isfinite(pl->backward_ms), "layer %d: backward %g",
                  i, pl->backward_ms);
        cr_assert(pl->backward_input_ms >= 0 && pl->backward_weight_ms >= 0);
        cr_assert(fabs(pl->backward_input_ms + pl->backward_weight_ms - pl->backward_ms) <=
                      1e-12 * pl->backward_ms,
                  "layer %d: I + W != B", i);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(p->layers[j].name, pl->name, "layers %d and %d share a name", j,
                              i);
    }
}

Test(profiler, mlp_profile_matches_the_model_and_loads_back)
{
    model *m = parse(mlp_spec);
    prof_cfg c = quick(16);
    plumb_err err = {{0}};
    prof_stats *st = NULL;
    profile *p = profiler_run(m, &c, &st, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_not_null(st);
    check_profile(m, p, 16);
    /* exact numbers of the spec: 36 inputs, 24 hidden, 5 classes, 16 samples */
    cr_assert_eq(p->layers[0].activation_bytes, 16 * 36 * 4);
    cr_assert_eq(p->layers[1].parameter_bytes, (36 * 24 + 24) * 4);
    cr_assert_eq(p->layers[3].parameter_bytes, (24 * 5 + 5) * 4);
    cr_assert_eq(p->layers[4].activation_bytes, 16 * 5 * 4);
    cr_assert_str_eq(p->layers[1].name, "fc");
    cr_assert_str_eq(p->layers[3].name, "fc_3");
    for (int i = 0; i < m->nlayers; i++) {
        cr_assert_eq(st[i].forward_ms, p->layers[i].forward_ms);
        cr_assert_eq(st[i].backward_ms, p->layers[i].backward_ms);
        cr_assert(st[i].forward_min_ms <= st[i].forward_ms &&
                  st[i].forward_ms <= st[i].forward_max_ms);
    }
    /* a weightless layer's W pass does nothing: its share is at most its I share */
    cr_assert(p->layers[2].backward_weight_ms <= p->layers[2].backward_input_ms);

    char path[] = "/tmp/plumb-test-profiler-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(profile_save(p, path, &err), 0, "%s", err.msg);
    profile *q = profile_load(path, &err);
    unlink(path);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    profile_free(q);
    profile_free(p);
    free(st);
    model_free(m);
}

Test(profiler, conv_and_token_models)
{
    const char *specs[] = {cnn_spec, lm_spec};
    for (int k = 0; k < 2; k++) {
        model *m = parse(specs[k]);
        prof_cfg c = quick(4);
        plumb_err err = {{0}};
        profile *p = profiler_run(m, &c, NULL, &err);
        cr_assert_not_null(p, "%s: %s", m->name, err.msg);
        check_profile(m, p, 4);
        profile_free(p);
        model_free(m);
    }
}

Test(profiler, workers_hint_is_recorded_and_restored)
{
    model *m = parse(mlp_spec);
    prof_cfg c = quick(8);
    c.workers = 2;
    plumb_err err = {{0}};
    profile *p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert(strstr(p->source, "1 of 2 workers"), "%s", p->source);
    profile_free(p);
    model_free(m);
}

Test(profiler, skeleton_sizes_without_timing)
{
    model *m = parse(cnn_spec);
    plumb_err err = {{0}};
    profile *p = profiler_skeleton(m, 10, "dev", NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    /* conv: 4 x 8 x 8 outputs, (4 * 2 * 3 * 3 + 4) parameters */
    cr_assert_eq(p->layers[0].activation_bytes, 10.0 * 4 * 8 * 8 * 4);
    cr_assert_eq(p->layers[0].parameter_bytes, (4.0 * 2 * 9 + 4) * 4);
    cr_assert_eq(p->layers[2].activation_bytes, 10.0 * 4 * 4 * 4 * 4); /* pooled 4x4 */
    cr_assert_eq(p->layers[4].parameter_bytes, (64.0 * 3 + 3) * 4);
    cr_assert_eq(p->layers[0].forward_ms, 0);
    cr_assert_lt(p->layers[0].backward_input_ms, 0); /* no split in a skeleton */
    cr_assert_str_eq(p->source, "");
    profile_free(p);
    cr_assert_null(profiler_skeleton(m, 0, "dev", "", &err));
    cr_assert(strstr(err.msg, "batch"), "%s", err.msg);
    model_free(m);
}

/* Bytes the CPU backend allocated for stage [i, i] of m at B samples with nslots slots. */
static size_t stage_bytes(const model *m, int i, int B, int nslots, int split)
{
    const backend *bk = backend_cpu();
    plumb_err err = {{0}};
    bk_ctx *ctx = bk->create(0, &err);
    cr_assert_not_null(ctx, "%s", err.msg);
    stage *st = stage_create(bk, ctx, m, i, i, B, nslots, split, &err);
    cr_assert_not_null(st, "%s", err.msg);
    size_t n = bk->mem_peak(ctx);
    stage_free(st);
    bk->destroy(ctx);
    return n;
}

/* The memory fields of a profile are what the executor's stages allocate: per slot the
 * input, the output and saved_bytes; per slot with a split backward split_saved_bytes; once
 * the weights, their gradients, the input gradient and grad_buffer_bytes. 16 samples keep
 * every buffer but the weights' a whole number of the CPU backend's 64-byte units, so the
 * sums are exact. */
Test(profiler, memory_fields_are_what_the_stages_allocate)
{
    const char *specs[] = {mlp_spec, cnn_spec, lm_spec};
    const int B = 16;
    for (int k = 0; k < 3; k++) {
        model *m = parse(specs[k]);
        plumb_err err = {{0}};
        profile *p = profiler_skeleton(m, B, "dev", NULL, &err);
        cr_assert_not_null(p, "%s", err.msg);
        cr_assert_eq(p->input_bytes, (double)B * shape_numel(m->in_ndim, m->in_shape) * 4);
        for (int i = 0; i < m->nlayers; i++) {
            const layer *L = &m->layers[i];
            const profile_layer *pl = &p->layers[i];
            double in = (double)B * shape_numel(L->in_ndim, L->in_shape) * 4;
            double out = L->kind == LK_FLATTEN ? 0 : pl->activation_bytes;
            double one = (double)stage_bytes(m, i, B, 1, 0);
            double two = (double)stage_bytes(m, i, B, 2, 0);
            double split = (double)stage_bytes(m, i, B, 2, 1);
            cr_expect_eq(two - one, in + out + pl->saved_bytes, "%s layer %d (%s): a slot "
                         "takes %g bytes, the profile says %g", m->name, i, pl->kind,
                         two - one, in + out + pl->saved_bytes);
            cr_expect_eq(split - two, 2 * pl->split_saved_bytes, "%s layer %d", m->name, i);
            double dx = L->kind == LK_FLATTEN || L->kind == LK_EMBEDDING ? 0 : in;
            /* the weight buffers: whole 64-byte units, at least one */
            double wb = pl->parameter_bytes > 0 ? ceil(pl->parameter_bytes / 64) * 64 : 64;
            cr_expect_eq(one, 2 * wb + dx + pl->grad_buffer_bytes + in + out + pl->saved_bytes,
                         "%s layer %d (%s): %g bytes", m->name, i, pl->kind, one);
        }
        /* hand-computed: the lm's block keeps layernorm's output and 2 x 8 statistics, the
         * 36-wide projection, attention's output and 2 x 8 x 8 probabilities, and the last
         * linear's output */
        if (m->layers[1].kind == LK_RESIDUAL)
            cr_expect_eq(p->layers[1].saved_bytes,
                         (double)B * 4 * (8 * 12 + 2 * 8 + 8 * 36 + 8 * 12 + 2 * 8 * 8 + 8 * 12));
        profile_free(p);
        model_free(m);
    }
}

Test(profiler, workspace_is_measured_per_layer)
{
    model *m = parse(cnn_spec);
    prof_cfg c = quick(4);
    plumb_err err = {{0}};
    profile *p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    /* the convolution's im2col operands: at least one sample's (2*3*3) x (8*8) floats */
    cr_expect_geq(p->layers[0].workspace_bytes, 18.0 * 64 * 4, "%g",
                  p->layers[0].workspace_bytes);
    cr_expect_eq(p->layers[1].workspace_bytes, 0, "relu needs no scratch");
    profile_free(p);
    model_free(m);
}

Test(profiler, bad_settings_are_refused)
{
    model *m = parse(mlp_spec);
    int bad[][4] = {{0, 1, 3, 1}, {8, -1, 3, 1}, {8, 1, 0, 1}, {8, 1, 3, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        prof_cfg c = quick(bad[i][0]);
        c.warmup = bad[i][1];
        c.runs = bad[i][2];
        c.workers = bad[i][3];
        plumb_err err = {{0}};
        prof_stats *st = (prof_stats *)&err; /* must be reset to NULL */
        cr_assert_null(profiler_run(m, &c, &st, &err), "case %zu", i);
        cr_assert_null(st);
        cr_assert(strstr(err.msg, "profiler: expected"), "%s", err.msg);
    }
    model_free(m);
}

Test(profiler, cuda_without_a_device_fails_cleanly)
{
    plumb_err err = {{0}};
    const backend *bk = backend_find("cuda", &err);
    if (!bk) {
        cr_assert(err.msg[0]); /* not built: says so */
        return;
    }
    bk_ctx *ctx = bk->create(0, &err);
    if (ctx) { /* a GPU is here: the profile must work on it too */
        bk->destroy(ctx);
        model *m = parse(mlp_spec);
        prof_cfg c = quick(8);
        c.bk = bk;
        profile *p = profiler_run(m, &c, NULL, &err);
        cr_assert_not_null(p, "%s", err.msg);
        cr_assert_str_eq(p->device, "cuda:0");
        profile_free(p);
        model_free(m);
        return;
    }
    model *m = parse(mlp_spec);
    prof_cfg c = quick(8);
    c.bk = bk;
    cr_assert_null(profiler_run(m, &c, NULL, &err));
    cr_assert(err.msg[0]);
    model_free(m);
}

Test(profiler, median)
{
    double a[] = {5, 1, 3};
    cr_assert_eq(profiler_median(a, 3), 3);
    double b[] = {4, 1, 3, 2};
    cr_assert_eq(profiler_median(b, 4), 2.5);
    double c[] = {7};
    cr_assert_eq(profiler_median(c, 1), 7);
    cr_assert_eq(profiler_median(c, 0), 0);
}


/* 8 layers of 16 x 64 floats each: the model of the memory fall-back and chain tests. */
static const char *const EVEN_SPEC =
    "{\"format\": \"plumb-model/1\", \"name\": \"even\", \"input\": [64],"
    " \"classes\": 64, \"layers\": ["
    " {\"type\": \"linear\", \"out\": 64}, {\"type\": \"relu\"},"
    " {\"type\": \"linear\", \"out\": 64}, {\"type\": \"relu\"},"
    " {\"type\": \"linear\", \"out\": 64}, {\"type\": \"relu\"},"
    " {\"type\": \"linear\", \"out\": 64}, {\"type\": \"softmax_cross_entropy\"}]}";
/* A CPU backend whose device memory is capped, to drive the profiler's fallback: when all
 * the one-layer stages do not fit at once it times the layers one at a time. Each block
 * carries its size in a 16-byte header. Test-only state (each Criterion test is its own
 * process). */
static size_t cap_live, cap_peak, cap_limit;

static void *cap_alloc(bk_ctx *c, size_t bytes, plumb_err *err)
{
    if (cap_live + bytes > cap_limit) {
        err_set(err, NULL, NULL, "out of device memory (test cap %zu bytes)", cap_limit);
        return NULL;
    }
    unsigned char *p = backend_cpu()->alloc(c, bytes + 16, err);
    if (!p) return NULL;
    memcpy(p, &bytes, sizeof bytes);
    cap_live += bytes;
    if (cap_live > cap_peak) cap_peak = cap_live;
    return p + 16;
}

static void cap_free(bk_ctx *c, void *q)
{
    if (!q) return;
    unsigned char *p = (unsigned char *)q - 16;
    size_t bytes;
    memcpy(&bytes, p, sizeof bytes);
    cap_live -= bytes;
    backend_cpu()->free(c, p);
}

Test(profiler, falls_back_to_one_layer_at_a_time_when_memory_is_short)
{
    model *m = parse(EVEN_SPEC);
    backend capped = *backend_cpu();
    capped.alloc = cap_alloc;
    capped.free = cap_free;
    prof_cfg c = quick(16);
    c.bk = &capped;
    plumb_err err = {{0}};
    cap_limit = (size_t)-1 / 2;
    profile *p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_null(strstr(p->source, "one at a time"));
    size_t all = cap_peak;
    profile_free(p);
    /* room for the largest single layer (a linear layer: well under a third of all) */
    cap_peak = 0;
    cap_limit = all / 3;
    p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert(strstr(p->source, "layers timed one at a time (memory)"), "%s", p->source);
    cr_assert_leq(cap_peak, all / 3);
    check_profile(m, p, 16);
    profile_free(p);
    /* not even one layer fits: a clean failure */
    cap_limit = 64;
    cr_assert_null(profiler_run(m, &c, NULL, &err));
    cr_assert(strstr(err.msg, "out of device memory"), "%s", err.msg);
    cr_assert_eq(cap_live, 0, "device memory leaked: %zu bytes", cap_live);
    model_free(m);
}

/* The caller's data set is the one profiled (named in source); one that does not fit the
 * model is refused before anything is measured. */
Test(profiler, profiles_on_the_callers_data)
{
    static const char *const spec =
        "{\"format\": \"plumb-model/1\", \"name\": \"small\", \"input\": [12],"
        " \"classes\": 3, \"layers\": [{\"type\": \"linear\", \"out\": 8},"
        " {\"type\": \"relu\"}, {\"type\": \"linear\", \"out\": 3},"
        " {\"type\": \"softmax_cross_entropy\"}]}";
    static const char *const other =
        "{\"format\": \"plumb-model/1\", \"name\": \"other\", \"input\": [5],"
        " \"classes\": 3, \"layers\": [{\"type\": \"linear\", \"out\": 3},"
        " {\"type\": \"softmax_cross_entropy\"}]}";
    model *m = parse(spec), *o = parse(other);
    plumb_err err = {{0}};
    dataset *d = data_synthetic(m, 40, 5, &err), *bad = data_synthetic(o, 40, 5, &err);
    cr_assert(d && bad, "%s", err.msg);
    prof_cfg c = quick(8);
    c.data = d;
    profile *p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    check_profile(m, p, 8);
    cr_assert(strstr(p->source, "on the caller's data"), "%s", p->source);
    profile_free(p);
    c.data = bad;
    cr_assert_null(profiler_run(m, &c, NULL, &err));
    cr_assert(err.msg[0]);
    data_free(d);
    data_free(bad);
    model_free(m);
    model_free(o);
}

/* Copies of 16 x 64 floats the profiler asks of the backend (the chain hands each layer's
 * forward output to the next layer's input with bk->copy; the layers' passes make some too). */
static int copies_of_4096;
static void counting_copy(bk_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (bytes == 4096) copies_of_4096++;
    backend_cpu()->copy(c, dst, src, bytes);
}

/* With every layer's stage in memory, each layer after the first is timed on the output of
 * the one before: 7 more hand-overs of 16 x 64 floats for the 8 layers below than when the
 * layers are timed one at a time (too little memory), which runs the same passes alone. */
Test(profiler, layers_are_timed_on_the_previous_layers_output)
{
    model *m = parse(EVEN_SPEC);
    backend counted = *backend_cpu();
    counted.copy = counting_copy;
    counted.alloc = cap_alloc;
    counted.free = cap_free;
    prof_cfg c = quick(16);
    c.bk = &counted;
    plumb_err err = {{0}};
    cap_limit = (size_t)-1 / 2;
    cap_peak = 0;
    copies_of_4096 = 0;
    profile *p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_null(strstr(p->source, "one at a time"), "%s", p->source);
    int chained = copies_of_4096;
    size_t all = cap_peak;
    profile_free(p);
    cap_limit = all / 3;
    copies_of_4096 = 0;
    p = profiler_run(m, &c, NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert(strstr(p->source, "one at a time"), "%s", p->source);
    cr_expect_eq(chained - copies_of_4096, 7, "%d copies chained, %d alone", chained,
                 copies_of_4096);
    profile_free(p);
    model_free(m);
}
