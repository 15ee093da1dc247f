/* GLUE-style TSV files: one example per row, tab-separated, no quoting (as GLUE's own files and
 * google-research/bert's run_classifier.py read them). The layout is a GLUE preset
 * ([task] glue_task) or explicit columns:
 *   sst2  header, 2 columns: sentence, label (0/1)
 *   cola  no header, 4 columns: source, label (0/1), original label, sentence
 *   mrpc  header (UTF-8 BOM), 5 columns: label (0/1), id, id, sentence 1, sentence 2
 *   rte   header, 4 columns: index, sentence 1, sentence 2, label (entailment/not_entailment)
 *   stsb  header, 10 columns: ..., sentence 1 (7), sentence 2 (8), score 0-5 (9), regression
 * A byte-order mark and '\r' line ends are removed. A row with the wrong column count, a label
 * outside the task's set or a score that is not a finite number is reported with file and line
 * and skipped (counted) or fatal per [task] bad_examples. */
#pragma once
#include "train/config/config.h"
#include "train/tasks/task_data.h"
#include "train/data/tokenizer.h"

#define GLUE_MAX_LABELS 32
#define GLUE_LABEL_MAX 64
#define GLUE_MAX_TARGET 1e6 /* regression targets beyond +-this are bad examples (STS-B: [0, 5]) */

typedef struct {
    GlueTask task;
    TaskKind type;
    int text_a, text_b, label; /* 0-based columns; text_b, label -1 = absent */
    int num_columns;           /* 0 = as in the first row */
    int header;
    int num_labels; /* classification: label values in index order */
    char label_names[GLUE_MAX_LABELS][GLUE_LABEL_MAX];
} GlueLayout;

/* The layout the [task] section describes (a preset or its column keys). */
GlueLayout glue_layout(const TaskConfig *task);
/* Read a TSV file and append one sequence per valid row to f (example = 0-based data row).
 * Returns the number of data rows read (valid or not). */
int glue_load(TaskFeatures *f, const GlueLayout *layout, const char *path, const Tokenizer *tok,
              BadExamplePolicy policy);
/* Predictions file: header "index<TAB>prediction", one line per sequence: its data row and the
 * label value (classification, then one column prob_LABEL per label: the softmax of the logits
 * [count, num_labels], which are read only for classification) or score (regression). */
void glue_write_predictions(const char *path, const GlueLayout *layout, const TaskFeatures *f, const float *logits,
                            const int *pred_labels,
                            const float *pred_values);
