/* tp.h: which layers tensor parallelism splits (Megatron's layout), and the check that a
 * tensor-parallel degree fits a model.
 *
 * Inside a residual block, the first run of three children "linear, attention | gelu |
 * relu, linear" is split over the tp ranks of a group: the first linear column-parallel
 * (each rank holds the rows of W and b of its share of the outputs; before an attention,
 * the rows of its heads' queries, keys and values, so the outputs split in 3 groups), the
 * middle layer local (attention on the rank's heads, the activation on its columns), the
 * second linear row-parallel (each rank holds its share of W's input columns; b is held
 * whole by every rank and added by rank 0 only), its output summed over the group. The
 * embedding, the output layer and the loss are split over the vocabulary (tp_layer_role).
 * Every other layer (layer norms) is replicated. */
#ifndef PLUMB_EXEC_TP_H
#define PLUMB_EXEC_TP_H

#include <stdint.h>

#include "exec/model.h"

typedef enum tp_role {
    TP_REPL = 0,   /* replicated: every rank holds and computes it whole */
    TP_COL,        /* linear, column-parallel: output features split */
    TP_LOCAL,      /* attention or activation on the rank's share of the features */
    TP_ROW,        /* linear, row-parallel: input features split, output summed */
    TP_VOCAB       /* embedding, vocabulary-parallel: token rows split, output summed */
} tp_role;

/* The role of child i of residual block blk under tensor parallelism; *groups (may be
 * NULL) gets how many groups a column-parallel layer's outputs form (3 before an
 * attention: queries, keys, values; else 1). Any other layer: TP_REPL. */
tp_role tp_child_role(const layer *blk, int i, int *groups);

/* The role of top-level layer i of m: TP_VOCAB for the embedding (each rank holds the
 * token rows [r V/tp, (r + 1) V/tp) and a zero row for the others' tokens; the position
 * rows whole, added by rank 0 only; the output summed); TP_COL for the linear layer just
 * before the loss (the output layer: each rank computes the logits of its share of the
 * classes); TP_LOCAL for the loss (the vocabulary-parallel cross-entropy, whose steps
 * are backend entries: exec/backend.h's xent_tp_*); else TP_REPL. */
tp_role tp_layer_role(const model *m, int i);

/* Checks that tp ranks can split m: tp >= 1, and for tp > 1 at least one block splits
 * and tp divides the heads of every split attention, the width of every split
 * activation, the embedding's vocabulary and the output layer's classes. Returns 0, or
 * -1 with err set ("FIELD: expected ... (got ...)"; path names the file). */
int tp_check(const model *m, int tp, const char *path, plumb_err *err);
/* With sequence parallelism too: m takes token ids, tp divides its context length, and
 * its top-level layers are the embedding, residual blocks whose layers besides the split
 * run are layer norms, layer norms, the output layer and the loss (what runs on a share
 * of the sequence must be row-wise). 0, or -1 with err set. */
int tp_check_seq(const model *m, int tp, const char *path, plumb_err *err);

#endif
