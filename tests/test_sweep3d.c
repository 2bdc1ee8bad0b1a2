/* test_sweep3d.c: the transformer sweep over GPU counts (planner/sweep3d.h): the counts
 * (whole servers, doubled), each count's best layout against the search on that count
 * alone, the days, cost and cost per million tokens recomputed here from the tokens/s, the
 * deadline's fewest GPUs and the Pareto front found here by comparing every pair, the SVG
 * (a point per count that fits, the front joined, the deadline) and the bad inputs. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/sweep3d.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define LLAMA8B "examples/llm/llama3-8b.json"
#define GPT3 "examples/llm/gpt3-175b.json"

static transformer *model(const char *path)
{
    plumb_err err = {{0}};
    transformer *t = transformer_load(path, &err);
    cr_assert_not_null(t, "%s", err.msg);
    return t;
}

static cluster *a100(void)
{
    plumb_err err = {{0}};
    cluster *c = cluster_load(A100, &err);
    cr_assert_not_null(c, "%s", err.msg);
    return c;
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

/* Llama-3-8B on 8..40 GPUs (8, 16, 32 and 40; a global batch of 640 that dp 5 divides),
 * 1e11 tokens at 2 USD per GPU-hour, within 60 days. */
Test(sweep3d, figures_deadline_and_front)
{
    transformer *t = model(LLAMA8B);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.global_batch = 640;
    const double tokens = 1e11, price = 2, deadline = 60;
    sweep3d_result r;
    plumb_err err = {{0}};
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 3, 40, tokens, price, deadline, &r, &err), 0,
                 "%s", err.msg);
    static const int want[] = {8, 16, 32, 40};
    cr_assert_eq(r.n, 4);
    int fewest = -1;
    for (int i = 0; i < r.n; i++) {
        const sweep3d_point *p = &r.pts[i];
        cr_assert_eq(p->gpus, want[i]);
        cr_assert(p->ok, "%d GPUs: %s", p->gpus, p->why);
        double tps = p->best.tokens_per_s;
        cr_assert_gt(tps, 0);
        cr_assert_eq(p->best.d.tp * p->best.d.pp * p->best.d.dp, p->gpus);
        cr_assert_float_eq(p->days, tokens / tps / 86400, 1e-9 * p->days);
        cr_assert_float_eq(p->cost, p->days * 24 * p->gpus * price, 1e-9 * p->cost);
        cr_assert_float_eq(p->usd_per_million, price * p->gpus / 3600 / tps * 1e6,
                           1e-9 * p->usd_per_million);
        if (fewest < 0 && p->days <= deadline) fewest = p->gpus;
        int dominated = 0;
        for (int j = 0; j < r.n; j++)
            if (j != i && r.pts[j].ok && r.pts[j].days <= p->days && r.pts[j].cost <= p->cost &&
                (r.pts[j].days < p->days || r.pts[j].cost < p->cost))
                dominated = 1;
        cr_assert_eq(p->pareto, !dominated, "%d GPUs", p->gpus);
    }
    cr_assert_eq(r.deadline_gpus, fewest);
    /* the sweep's best on 16 GPUs is the search's best on 16 (same simulated count) */
    search3d_options so = o;
    so.gpus = 16, so.simulate = SWEEP3D_SIMULATE;
    search3d_result *s = search3d_run(t, c, A100, &so, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_float_eq(s->ranked[0].tokens_per_s, r.pts[1].best.tokens_per_s, 1e-9);
    search3d_free(s);
    size_t len = 0;
    char *svg = sweep3d_svg(&r, &len);
    cr_assert_not_null(svg);
    cr_assert_eq(strlen(svg), len);
    cr_assert_eq(count_of(svg, "<circle class=\"point"), 4);
    int front = 0;
    for (int i = 0; i < r.n; i++) front += r.pts[i].pareto;
    cr_assert_eq(count_of(svg, "<circle class=\"point front\""), front);
    cr_assert_eq(count_of(svg, "class=\"deadline\""), 1);
    cr_assert(strstr(svg, "32 GPUs"));
    cr_assert(strstr(svg, "</svg>"));
    free(svg);
    cJSON *j = sweep3d_to_json(&r);
    cr_assert_not_null(j);
    cJSON_Delete(j);
    sweep3d_result_free(&r);
    cluster_free(c);
    transformer_free(t);
}

/* GPT-3 fits no layout on 8 or 16 GPUs: those counts say why; none at all is bad input. */
Test(sweep3d, counts_that_do_not_fit)
{
    transformer *t = model(GPT3);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.global_batch = 64;
    sweep3d_result r;
    plumb_err err = {{0}};
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 8, 64, 0, 0, 0, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, 4);
    cr_assert(!r.pts[0].ok && !r.pts[1].ok);
    cr_assert(strstr(r.pts[0].why, "expected a layout that fits"), "%s", r.pts[0].why);
    cr_assert(r.pts[3].ok);
    cr_assert_lt(r.pts[3].days, 0);
    cr_assert_null(sweep3d_svg(&r, &(size_t){0})); /* no token budget: nothing to plot */
    sweep3d_result_free(&r);
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 8, 16, 0, 0, 0, &r, &err), -1);
    cr_assert(strstr(err.msg, "expected a layout that fits"), "%s", err.msg);
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 1, 7, 0, 0, 0, &r, &err), -1);
    cr_assert(strstr(err.msg, "--gpus: expected a range holding a whole server"), "%s",
              err.msg);
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 8, 64, 0, 0, 30, &r, &err), -1);
    cr_assert(strstr(err.msg, "--deadline: expected --tokens N"), "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
}
