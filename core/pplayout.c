/* pplayout.c: Megatron-Core's flexible pipeline layout string (core/pplayout.h): the
 * string unrolled under a bound, split into virtual stages, and checked against the model,
 * the pipeline and what plumb's stages can hold. */
#include "core/pplayout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char OPT[] = "--pipeline-layout";

/* The unrolled layout being built: characters E L t m and '|'. */
typedef struct unrolled {
    char *s;
    size_t n, cap;
} unrolled;

/* Appends len characters of src, times times, to u, refusing past PPLAYOUT_MAX_ITEMS
 * before allocating anything. 0, or -1 with err set. */
static int append(unrolled *u, const char *src, size_t len, long long times, plumb_err *err)
{
    long long add = (long long)len * times; /* len and times are at most 2^20 + 1 */
    if ((long long)u->n + add > PPLAYOUT_MAX_ITEMS)
        return err_set(err, NULL, OPT, "expected at most %d layers and separators once the "
                       "repeats are unrolled (got more)", PPLAYOUT_MAX_ITEMS);
    if (u->n + (size_t)add + 1 > u->cap) {
        size_t cap = u->cap ? u->cap : 64;
        while (cap < u->n + (size_t)add + 1) cap *= 2;
        char *s = realloc(u->s, cap);
        if (!s) return err_set(err, NULL, NULL, "out of memory");
        u->s = s, u->cap = cap;
    }
    for (long long k = 0; k < times; k++, u->n += len) memcpy(u->s + u->n, src, len);
    u->s[u->n] = 0;
    return 0;
}

/* The repeat count after the '*' at s[*i] (pos: each character's place in the string as
 * given, 1-based, for messages); moves *i past the digits. Counts past PPLAYOUT_MAX_ITEMS
 * read as PPLAYOUT_MAX_ITEMS + 1 (append refuses them). -1 with err set when no digit
 * follows the '*', or when a second "*n" follows the first. */
static long long repeat_count(const char *s, const int *pos, size_t *i, plumb_err *err)
{
    size_t star = (*i)++;
    if (s[*i] < '0' || s[*i] > '9')
        return err_set(err, NULL, OPT, "expected a repeat count (digits) after the '*' at "
                       "character %d", pos[star]);
    long long v = 0;
    for (; s[*i] >= '0' && s[*i] <= '9'; (*i)++)
        if (v <= PPLAYOUT_MAX_ITEMS) v = v * 10 + (s[*i] - '0');
    if (v > PPLAYOUT_MAX_ITEMS) v = PPLAYOUT_MAX_ITEMS + 1;
    if (s[*i] == '*')
        return err_set(err, NULL, OPT, "expected one repeat count, not a second '*' at "
                       "character %d (Megatron-Core unrolls x*n and (...)*n once)", pos[*i]);
    return v;
}

/* One line for the unexpected character at s[i]. -1. */
static int bad_char(const char *s, const int *pos, size_t i, plumb_err *err)
{
    unsigned char c = (unsigned char)s[i];
    if (c == ')')
        return err_set(err, NULL, OPT, "expected '(' before the ')' at character %d "
                       "(unbalanced parentheses)", pos[i]);
    if (c == '*')
        return err_set(err, NULL, OPT, "expected a character or a (...) group before the "
                       "'*' at character %d (a bad repeat count)", pos[i]);
    if (c > ' ' && c < 127)
        return err_set(err, NULL, OPT, "expected E, t, L, m, '|', ',' or a repeat x*n or "
                       "(...)*n (got '%c' at character %d)", c, pos[i]);
    return err_set(err, NULL, OPT, "expected E, t, L, m, '|', ',' or a repeat x*n or "
                   "(...)*n (got byte 0x%02x at character %d)", c, pos[i]);
}

static int is_item(char c) { return c == 'E' || c == 't' || c == 'L' || c == 'm' || c == '|'; }

/* Unrolls s (commas already dropped, pos their places) from *i into u: characters, each
 * optionally "*n", and, outside a group (group 0), groups "(...)*n", whose inside this
 * unrolls with group 1 up to its ')'. 0, or -1 with err set. */
static int unroll(const char *s, const int *pos, size_t *i, int group, unrolled *u,
                  plumb_err *err)
{
    while (s[*i] && !(group && s[*i] == ')')) {
        size_t at = *i;
        if (is_item(s[at])) {
            long long times = 1;
            (*i)++;
            if (s[*i] == '*' && (times = repeat_count(s, pos, i, err)) < 0) return -1;
            if (append(u, s + at, 1, times, err)) return -1;
            continue;
        }
        if (s[at] != '(') return bad_char(s, pos, at, err);
        if (group)
            return err_set(err, NULL, OPT, "expected no '(' inside the group opened before "
                           "character %d (Megatron-Core does not unroll nested groups)",
                           pos[at]);
        unrolled in = {0};
        (*i)++;
        if (unroll(s, pos, i, 1, &in, err)) {
            free(in.s);
            return -1;
        }
        int rc = -1;
        long long times;
        if (s[*i] != ')')
            err_set(err, NULL, OPT, "expected ')' to close the '(' at character %d "
                    "(unbalanced parentheses)", pos[at]);
        else if (!in.n)
            err_set(err, NULL, OPT, "expected layers inside the group at character %d (got "
                    "an empty group)", pos[at]);
        else if (s[++*i] != '*')
            err_set(err, NULL, OPT, "expected a repeat count \"*n\" after the group at "
                    "character %d", pos[at]);
        else if ((times = repeat_count(s, pos, i, err)) >= 0)
            rc = append(u, in.s, in.n, times, err);
        free(in.s);
        if (rc) return -1;
    }
    return 0;
}

void pplayout_free(pplayout *l)
{
    if (!l) return;
    free(l->stages);
    free(l);
}

/* The layout of the unrolled characters u[0 .. n - 1]. NULL when out of memory. */
static pplayout *split_stages(const char *u, size_t n)
{
    int stages = 1;
    for (size_t k = 0; k < n; k++) stages += u[k] == '|';
    pplayout *l = calloc(1, sizeof *l);
    if (!l || !(l->stages = calloc((size_t)stages, sizeof *l->stages))) {
        free(l);
        return NULL;
    }
    l->nstages = stages;
    pplayout_stage *st = l->stages;
    for (size_t k = 0; k < n; k++) {
        char c = u[k];
        if (c == '|') {
            st++;
            continue;
        }
        if (!l->first) l->first = c;
        l->last = c;
        st->embedding += c == 'E', st->blocks += c == 't', st->loss += c == 'L';
        st->mtp += c == 'm';
    }
    return l;
}

pplayout *pplayout_parse(const char *s, plumb_err *err)
{
    size_t len = strlen(s), n = 0, i = 0;
    char *bare = malloc(len + 1);
    int *pos = malloc((len + 1) * sizeof *pos);
    unrolled u = {0};
    pplayout *l = NULL;
    if (!bare || !pos) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < len; k++) /* Megatron-Core drops the commas first */
        if (s[k] != ',') bare[n] = s[k], pos[n++] = (int)k + 1;
    bare[n] = 0;
    pos[n] = (int)len + 1;
    if (unroll(bare, pos, &i, 0, &u, err)) goto done;
    if (!(l = split_stages(u.s ? u.s : "", u.n))) err_set(err, NULL, NULL, "out of memory");
done:
    free(u.s);
    free(pos);
    free(bare);
    return l;
}

int pplayout_check(const pplayout *l, int blocks, int pp, int v, plumb_err *err)
{
    int E = 0, L = 0, t = 0, m = 0;
    for (int k = 0; k < l->nstages; k++) {
        E += l->stages[k].embedding, L += l->stages[k].loss;
        t += l->stages[k].blocks, m += l->stages[k].mtp;
    }
    if (pp < 1 || l->nstages % pp)
        return err_set(err, NULL, OPT, "expected a number of virtual stages ('|'-separated) "
                       "that is a multiple of --pp %d (got %d)", pp, l->nstages);
    if (v > 0 && l->nstages / pp != v)
        return err_set(err, NULL, "--interleave", "expected the layout's %d virtual stages / "
                       "--pp %d = %d (got %d)", l->nstages, pp,
                       l->nstages / pp, v);
    if (l->first != 'E')
        return err_set(err, NULL, OPT, "expected the embedding E as the first layer (got %s)",
                       l->first == 't' ? "a block t" : l->first == 'L' ? "the loss L"
                       : l->first == 'm' ? "an MTP layer m" : "no layer");
    if (l->last != 'L')
        return err_set(err, NULL, OPT, "expected the loss L as the last layer (got %s)",
                       l->last == 't' ? "a block t" : l->last == 'E' ? "the embedding E"
                       : "an MTP layer m");
    if (E != 1) return err_set(err, NULL, OPT, "expected E exactly once (got %d)", E);
    if (L != 1) return err_set(err, NULL, OPT, "expected L exactly once (got %d)", L);
    if (t != blocks)
        return err_set(err, NULL, OPT, "expected as many t as the model's %d layers (got %d)",
                       blocks, t);
    if (m)
        return err_set(err, NULL, OPT, "expected no MTP layer m: plumb models no multi-token "
                       "prediction (got %d)", m);
    for (int k = 0; k < l->nstages; k++) {
        const pplayout_stage *st = &l->stages[k];
        if (st->embedding + st->blocks + st->loss) continue;
        return err_set(err, NULL, OPT, "expected every virtual stage to hold E, L or a block t: "
                       "plumb's stages each hold at least one layer (got virtual stage %d "
                       "(rank %d, chunk %d) empty)", k, k % pp, k / pp);
    }
    return 0;
}

int pplayout_stage_count(const char *s, plumb_err *err)
{
    pplayout *l = pplayout_parse(s, err);
    int n = l ? l->nstages : -1;
    pplayout_free(l);
    return n;
}

int pplayout_split(const char *s, int blocks, int pp, int v, int *n, plumb_err *err)
{
    pplayout *l = pplayout_parse(s, err);
    if (!l) return -1;
    int rc = pplayout_check(l, blocks, pp, v, err);
    for (int k = 0; !rc && k < l->nstages; k++) n[k] = l->stages[k].blocks;
    pplayout_free(l);
    return rc;
}

int pplayout_split_word(const pplayout_split_opts *o, int i, int brief, char *buf, size_t n)
{
    for (int k = 0; k < 4; k++) {
        int set = k == 0 ? o->first_blocks > 0 : k == 1 ? o->last_blocks > 0
                : k == 2 ? o->account_embedding : o->account_loss;
        if (!set || i-- > 0)
            continue;
        if (k < 2)
            snprintf(buf, n, brief ? "%s-%d" : "pp-%s-layers-%d", k ? "last" : "first",
                     k ? o->last_blocks : o->first_blocks);
        else
            snprintf(buf, n, "%s", k == 2 ? (brief ? "emb-split" : "embedding-in-split")
                                          : (brief ? "loss-split" : "loss-in-split"));
        return 1;
    }
    return 0;
}

int pplayout_split_equal(const pplayout_split_opts *a, const pplayout_split_opts *b)
{
    return a->first_blocks == b->first_blocks && a->last_blocks == b->last_blocks &&
           a->account_embedding == b->account_embedding && a->account_loss == b->account_loss;
}
