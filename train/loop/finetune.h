/* Fine-tuning (`realpos finetune`) and prediction (`realpos predict`): shared state of the two
 * commands. The model is the init checkpoint's encoder (train/transfer.h) with the task's head
 * (train/task_heads.h); examples are pre-tokenized once (train/task_data.h) from GLUE TSV
 * (train/glue.h) or SQuAD JSON (train/squad.h). */
#pragma once
#include "core/config.h"
#include "optim/adamw.h"
#include "train/tasks/glue.h"
#include "train/model/model.h"
#include "train/tasks/squad.h"
#include "train/tasks/task_data.h"
#include "train/model/task_heads.h"
#include "train/data/tokenizer.h"

typedef struct {
    Config cfg;
    char *vocab_text;
    Tokenizer *tok;
    SpecialTokens special;
    GlueLayout layout; /* classification / regression */
    Model model;
    Activations acts;
    HeadBuffers heads;
    int B, L;
    int *rows, *input_ids, *token_type_ids, *attention_mask; /* one batch: [B], [B, L] x 3 */
    int *labels, *start, *end;                               /* [B] targets */
    float *values;                                           /* [B] */
} TaskRunner;

/* Evaluation data: the sequences and, for SQuAD, the questions and windows behind them. */
typedef struct {
    TaskFeatures features;
    SquadSet squad;
    SquadWindows windows;
    const char *path;
} TaskData;

/* Read a data file for the task (GLUE TSV or SQuAD JSON); need_labels: training data. */
void task_data_load(TaskData *d, const TaskRunner *r, const char *path, int need_labels);
void task_data_free(TaskData *d);

/* Batch buffers and head buffers for the runner's model (after the model exists). */
void task_runner_buffers(TaskRunner *r);
void task_runner_free(TaskRunner *r);
/* Copy sequences rows[0..B) (< 0: padding) into the batch buffers and their targets. */
void task_fill_batch(TaskRunner *r, const TaskFeatures *f, const int *rows);

/* Predict every sequence of d, write the predictions file `out_path` (GLUE: index<TAB>prediction;
 * SQuAD: predictions.json), and, when the data is labelled, print the task's metrics to stdout
 * and append them as JSON to `results` (may be NULL). */
void task_predict(TaskRunner *r, TaskData *d, const char *out_path, FILE *results);
