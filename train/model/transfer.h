/* Starting a model from a checkpoint of another model: fine-tuning from any checkpoint
 * (task.init_checkpoint), and pretraining from one (--init), e.g. adding relative positions to an
 * absolute model (Huang et al. 2020's drop-in use).
 *
 * Every parameter of the new model whose name and shape match a dataset of the checkpoint's
 * /model is loaded; the others keep their fresh initialisation (task head, pooler), except the
 * table of a position scheme the checkpoint lacks: it starts at the value that makes its term vanish
 * (the scheme's transfer_identity, layers/positions.h: 0 for shaw, method4 and T5's shared bias, 1
 * for methods 1-3), so the new model's
 * scores, and every output, are at first the checkpoint model's. Checkpoint datasets the new model
 * has no use for (the MLM head) are dropped. A parameter present in both with different shapes is
 * fatal, naming it and both shapes, except the absolute position table with more rows: its first
 * rows load, the rest stay initialised. The table of what happened to each tensor is printed. For
 * a fresh run only: a resumed run transfers nothing (its weights are its checkpoint's, run.h). */
#pragma once
#include <hdf5.h>
#include <stdio.h>

#include "train/model/model.h"

typedef struct {
    int loaded, grown, initialised, dropped;
} TransferSummary;

/* One table line: "  STATUS  NAME  [d0, d1]" (rank 1 or 2). */
void transfer_print(FILE *table, const char *status, const char *name, int rank, const hsize_t *dims);
void transfer_print_summary(FILE *table, const TransferSummary *s);

/* m: created and freshly initialised; `model` names it in errors ("the fine-tuning model"). Prints
 * one line per tensor and a summary to `table` (may be NULL). */
TransferSummary transfer_load(hid_t file, const char *path, Model *m, const char *model, FILE *table);

/* Logs what a position scheme the checkpoint lacks does at step 0 (the scheme's transfer_note):
 * t5's table starts at zero (the outputs are the checkpoint's); alibi and rope have no parameters
 * that could start neutral, so the outputs change from step 0. Nothing for the schemes without a
 * note (their tables start neutral: transfer_identity). */
void transfer_note_positions(const ModelConfig *now, const ModelConfig *stored);
