/* pplayout.h: Megatron-Core's flexible pipeline layout string (--pipeline-model-parallel-
 * layout, megatron/core/transformer/pipeline_parallel_layer_layout.py), which plumb takes as
 * --pipeline-layout: virtual stages separated by '|', each a run of 'E' (the embedding),
 * 't' (a decoder block), 'L' (the output layer and loss) and 'm' (a multi-token prediction
 * layer); "x*n" repeats one character n times and "(...)*n" a group, commas are cosmetic.
 * Stage k of the list is virtual stage k = vpp_rank x pp + pp_rank. Parsing (the syntax)
 * and checking (Megatron-Core's rules against a model and a pipeline, and what plumb's
 * stages can hold) are here; layout3d_split builds the plan's stages from the result
 * (docs/llm.md, "Uneven splits"). */
#ifndef PLUMB_PPLAYOUT_H
#define PLUMB_PPLAYOUT_H

#include <stddef.h>

#include "core/err.h"

/* The longest layout once unrolled, in characters ('|' included): repeats past it are
 * refused rather than expanded. */
#define PPLAYOUT_MAX_ITEMS (1 << 20)

/* What one virtual stage of a layout holds, in the order the string gives it. */
typedef struct pplayout_stage {
    int embedding, blocks, loss, mtp; /* counts of 'E', 't', 'L', 'm' */
} pplayout_stage;

/* A parsed layout: the virtual stages in list order, and the first and last character of
 * the whole unrolled layout ('\0' when it holds none). */
typedef struct pplayout {
    int nstages;
    pplayout_stage *stages;
    char first, last;
} pplayout;

/* Parses layout string s as Megatron-Core's parse_str_to_list does (commas dropped, then
 * "(...)*n" and "x*n" unrolled, then split at '|'): the characters E L t m | , ( ) * and
 * digits only; a group "(...)" holds no other group (Megatron-Core's pattern does not unroll
 * nested ones), is not empty and is followed by "*n"; a repeat count n is digits (0 allowed,
 * as Megatron-Core's) following a character or a group, once. Returns a new layout
 * (pplayout_free), or NULL with err set to one line naming --pipeline-layout: an unknown
 * character, unbalanced or nested parentheses, a bad repeat count, more than
 * PPLAYOUT_MAX_ITEMS characters unrolled, or out of memory. Never expands past that bound:
 * no overflow and no hang whatever the counts. */
pplayout *pplayout_parse(const char *s, plumb_err *err);

void pplayout_free(pplayout *l);

/* Checks l against a model of `blocks` decoder blocks on pp pipeline ranks with v virtual
 * stages each (v 0: not given, any), in Megatron-Core's order (arguments.py and
 * TransformerConfig.__post_init__, validate_layer_layout): the stage count a multiple of
 * --pp, the stages per rank equal to --interleave when given, 'E' the first character and
 * 'L' the last, each exactly once, the 't' count equal to the blocks; then what plumb cannot
 * model: 'm' (no multi-token prediction) and a stage holding nothing (plumb's stages hold a
 * contiguous run of the embedding, blocks and head, at least one of them). 0, or -1 with
 * err set to one line naming --pipeline-layout (or --interleave when it disagrees). */
int pplayout_check(const pplayout *l, int blocks, int pp, int v, plumb_err *err);

/* The number of virtual stages of layout string s (its '|' count + 1, unrolled): >= 1, or
 * -1 with err set as pplayout_parse sets it. */
int pplayout_stage_count(const char *s, plumb_err *err);

/* Parses s, checks it (pplayout_check with blocks, pp, v) and writes the blocks of each of
 * its pp x v virtual stages into n[0 .. pp v - 1]. 0, or -1 with err set to one line. */
int pplayout_split(const char *s, int blocks, int pp, int v, int *n, plumb_err *err);

/* Megatron-Core's four other uneven-split options, as a plan's model, a layout's options
 * and a simulation report each hold them (0: not given). */
typedef struct pplayout_split_opts {
    int first_blocks;      /* --decoder-first-pipeline-num-layers */
    int last_blocks;       /* --decoder-last-pipeline-num-layers */
    int account_embedding; /* --account-for-embedding-in-pipeline-split */
    int account_loss;      /* --account-for-loss-in-pipeline-split */
} pplayout_split_opts;

/* 1 when a and b set the same options to the same values, else 0. */
int pplayout_split_equal(const pplayout_split_opts *a, const pplayout_split_opts *b);

/* The i-th word (from 0) naming the options of o that are set, in this order:
 * "pp-first-layers-N", "pp-last-layers-N", "embedding-in-split", "loss-in-split" (brief:
 * "first-N", "last-N", "emb-split", "loss-split"), the one list that plumb sim's layout line
 * and the dashboard's runtime row both print. Writes it (the brief form when brief is 1)
 * into buf of n bytes, truncated to fit, and returns 1; returns 0 past the last word. */
int pplayout_split_word(const pplayout_split_opts *o, int i, int brief, char *buf, size_t n);

#endif
