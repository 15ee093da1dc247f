/* Starting a fine-tuning model from a checkpoint of another model (pretraining or fine-tuning).
 *
 * Every parameter of the new model whose name and shape match a dataset of the checkpoint's
 * /model is loaded; the others keep their fresh initialisation (task head, pooler, relative tables
 * of a mode the checkpoint lacks; T5's shared table, when new, starts at zero instead, so that the
 * model's outputs at step 0 are the checkpoint's); checkpoint datasets the new model has no use for (the MLM head)
 * are dropped. A parameter present in both with different shapes is fatal, naming it and both
 * shapes, except the absolute position table with more rows: its first rows load, the rest stay
 * initialised. The table of what happened to each tensor is printed. For a fresh run only: a
 * resumed run transfers nothing (its weights are its checkpoint's, run.h). */
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

/* m: created and freshly initialised. Prints one line per tensor and a summary to `table`. */
TransferSummary transfer_load(hid_t file, const char *path, Model *m, FILE *table); /* table may be NULL */
