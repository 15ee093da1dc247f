/* Starting a model from a checkpoint of another model: fine-tuning from any checkpoint
 * (task.init_checkpoint), and pretraining from one (--init), e.g. adding relative positions to an
 * absolute model (Huang et al. 2020's drop-in use).
 *
 * Every parameter of the new model whose name and shape match a dataset of the checkpoint's
 * /model is loaded; the others keep their fresh initialisation (task head, pooler), except the
 * relative table of a mode the checkpoint lacks: it starts at the value that makes its term vanish
 * (ADDED_TABLES in transfer.c: 0 for shaw, method4 and T5's shared bias, 1 for methods 1-3): what they add
 * vanishes at first (whether the outputs are the checkpoint model's also depends on what the
 * checkpoint's own scheme contributed: transfer_outputs_kept). Checkpoint datasets the new model
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

/* Whether a model of `now` whose weights transfer_load took from a checkpoint of `stored` computes
 * exactly the checkpoint model's outputs at step 0 (1) or not (0), with the reason in `why`:
 * decided from what the checkpoint's scheme contributed (its bias, its rotation, its tables: kept,
 * dropped or read by another formula), what `now` adds (tables at their vanishing value, or a
 * bias or rotation with no neutral start), absolute positions and residual attention. The
 * checkpoint's own tables are read from `file` (`path` in errors): a table at the value where its
 * term vanishes contributes nothing, wherever it goes. */
int transfer_outputs_kept(hid_t file, const char *path, const ModelConfig *now, const ModelConfig *stored, char *why,
                          size_t size);
/* Logs that verdict, "t5 checkpoint -> method4: <outputs> differ from the checkpoint model's (...)",
 * and appends it to `table` (RUN_DIR/parameters.txt; may be NULL). `outputs` names what is compared
 * ("step 0's outputs", "step 0's encoder outputs"). */
void transfer_note_positions(hid_t file, const char *path, const ModelConfig *now, const ModelConfig *stored,
                             const char *outputs, FILE *table);
