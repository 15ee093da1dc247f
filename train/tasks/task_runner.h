/* The fine-tuning task's model and data, shared by `realpos finetune` and `realpos predict`: the
 * model is an encoder (train/model/transfer.h) with the task's head (train/model/task_heads.h);
 * examples are pre-tokenized once (task_data.h) from GLUE TSV (glue.h) or SQuAD JSON (squad.h). */
#pragma once
#include <stdio.h>

#include "train/model/transfer.h"
#include <hdf5.h>
#include <stdio.h>

#include "core/config/cli.h"
#include "train/config/config.h"
#include "train/data/tokenizer.h"
#include "train/model/batch_layout.h"
#include "train/model/checkpoint.h"
#include "train/model/model.h"
#include "train/model/task_heads.h"
#include "train/tasks/conll.h"
#include "train/tasks/glue.h"
#include "train/tasks/squad.h"
#include "train/tasks/task_data.h"

typedef struct {
    Config cfg;
    char *vocab_text;
    Tokenizer *tok;
    SpecialTokens special;
    GlueLayout layout; /* classification / regression */
    TagLabels tags;    /* tagging: task.tag_labels */
    Model model;
    Activations acts;
    HeadBuffers heads;
    int B, L; /* the largest batch: task.batch_size x task.max_seq_len (the activation layout) */
    int *rows, *input_ids, *token_type_ids, *attention_mask; /* one batch: [B], [B, batch.L] x 3 */
    int *labels, *start, *end;                               /* [B] targets */
    float *values;                                           /* [B] */
    int *token_labels;                                       /* [B, batch.L] tagging targets */
    Batch batch; /* the last batch task_fill_batch built: shape [B, L' <= L] over the arrays above,
                  * or with task.padding = none unpadded over relayout's (the arrays above hold
                  * it padded to its longest) */
    BatchLayout relayout;
    int (*should_stop)(void); /* polled between prediction batches (NULL: never): a stop signal */
    int interim_eval;         /* a dev evaluation during training: its metrics line goes to the log
                                 ("dev at step N: ..."), the final one alone to standard output */
    const char *record_kind;  /* the "kind" of the metrics record (NULL: "task_eval"; the test file's:
                                 "task_test") */
} TaskRunner;

/* Evaluation data: the sequences and, for SQuAD, the questions and windows behind them. */
typedef struct {
    TaskFeatures features;
    SquadSet squad;
    SquadWindows windows;
    TagSet tags; /* tagging: the words and where they landed */
    const char *path;
} TaskData;

/* Read a data file for the task (GLUE TSV with `layout`, SQuAD JSON, or tagging with task.tag_labels) into sequences of L tokens;
 * need_labels: training data. */
void task_data_load(TaskData *d, const TaskConfig *task, const GlueLayout *layout, const Tokenizer *tok, int L,
                    const char *path, int need_labels);
void task_data_free(TaskData *d);

/* Load a fine-tuning config (config_load_task of config_path, or of config_text when not NULL:
 * a resumed run's stored configuration, config_path naming it) with the overrides, set the thread
 * count, the GLUE layout and the batch shape; no model yet. */
void task_runner_setup(TaskRunner *r, const char *config_path, const char *config_text, int num_sets,
                       char *const *sets);
/* The GLUE layout, task type, B and L from r->cfg.task (again after r->cfg.task changed). */
void task_runner_derive(TaskRunner *r);
/* The heads the task needs: pooler + classifier (num_labels or 1 output) or the span head. */
ModelHeads task_runner_heads(const TaskRunner *r);
/* Fine-tuning: the task's model from the init checkpoint (config_adopt_model, the absolute table
 * grown to task.max_seq_len if needed, new parameters initialised with task.seed, the rest
 * transferred by name and shape, the table written to `table` (may be NULL)); vocabulary and
 * casing from the checkpoint. Returns the table's counts. resume: `from` is the run's own
 * checkpoint; the model is only created (the run loads every weight from it), one line names it
 * and its step, and nothing is transferred (all counts 0). */
TransferSummary task_runner_build_model(TaskRunner *r, const CheckpointFile *from, int resume, FILE *table);
/* Fatal, naming the checkpoint (`what`: how the command names it) and both label sets, if `from` has a
 * classifier and this task needs one whose rows would mean other labels: another task type or GLUE
 * task, other labels, or the same labels in another order. */
void task_runner_check_classifier(const TaskRunner *r, const CheckpointFile *from, const char *what);
/* A runner on a fresh model for cfg's task: the vocabulary of [data] vocab, weights from
 * model.seed, the buffers laid out (what `realpos bench --lengths-from` times). */
void task_runner_fresh(TaskRunner *r, const Config *cfg);
/* Vocabulary of a checkpoint (/vocab), or the file its stored [data] names; sets the tokenizer. */
void task_runner_load_vocab(TaskRunner *r, hid_t file, const char *path, const Config *stored);
/* Batch buffers and head buffers for the runner's model (after the model exists). */
void task_runner_buffers(TaskRunner *r);
void task_runner_free(TaskRunner *r);
/* Copy sequences rows[0..B) (< 0: padding) into the batch buffers and their targets and set
 * r->batch: [B, L'] with L' = their longest sequence rounded up to TASK_PAD_MULTIPLE
 * (task.padding = longest) or task.max_seq_len (max_length); with none r->batch is unpadded (the
 * arrays hold the longest layout) and a padding row has no rows. A padded position is masked
 * everywhere (attention keys, span logits), so the logits do not depend on L' beyond float
 * summation order. */
void task_fill_batch(TaskRunner *r, const TaskFeatures *f, const int *rows);

/* The task's primary metric, by which fine-tuning keeps its best checkpoint: SQuAD F1, Pearson
 * (regression), Matthews (CoLA), F1 (MRPC), else accuracy. name NULL, value NaN: unlabelled data. */
typedef struct {
    const char *name;
    double value;
    double within; /* tagging: token accuracy within task.train_max_length (all words when it is 0),
                    * the early stop's metric (task.stop_accuracy); NaN for the other tasks */
} TaskScore;

/* Predict every sequence of d, write the predictions file `out_path` (may be NULL; GLUE:
 * index<TAB>prediction; SQuAD: predictions.json), and, when the data is labelled, print the
 * task's metrics to stdout, append them as a JSON record to `results` (may be NULL; with "step"
 * when step >= 0) and return the primary one. */
TaskScore task_predict(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step);
/* task_predict of a tagging task (tagging_eval.c): one "word<TAB>label<TAB>probability" line per word,
 * a blank line after each example; token and sequence accuracy, entity P/R/F1 for BIO labels, and
 * both accuracies per length in words, within task.train_max_length and beyond. */
TaskScore tagging_predict(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step);
/* Tagging from scratch (task.init_checkpoint = none) and the training file's facts: conll_scan
 * into r->cfg.task, and for a fresh model the vocabulary (data.vocab, else built from the training
 * file) with model.vocab_size and, with absolute positions, model.max_position >= task.max_seq_len
 * (tagging_model.c). Before the run starts: the configuration is final after it. */
void tagging_prepare(TaskRunner *r, int fresh);
/* The fresh model of task.init_checkpoint = none: [model] as configured, model_init_weights with
 * model.seed (as `realpos init`), every parameter listed in `table` (may be NULL) as initialised. */
TransferSummary task_runner_build_fresh(TaskRunner *r, FILE *table);
/* Sequence indices of f by length, longest first, ties by index (task_eval.c; caller frees). */
int *rows_by_length(const TaskFeatures *f);
/* 1 if task.init_checkpoint is "none" (train from scratch). */
int task_from_scratch(const TaskConfig *task);
