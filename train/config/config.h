/* train/config/: the configuration of realpos, the base of train/ that every wing shares.
 *
 * The sections [model] [optim] [train] [data] [task] as one Config struct, its schema table
 * (train/config/schema.c: every section.key with its type, default, range and help text) and
 * the cross-key checks, on the generic typed INI engine of core/config/config_schema.h. Parsing a file,
 * `--set section.key=value` overrides and re-parsing the config text stored in a checkpoint all
 * go through it. Any error stops the program with
 *     FILE:LINE: key 'x': expected ..., got ...
 * (for overrides the origin is "--set section.key=value"). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "core/config/config_schema.h"
#include "core/kinds.h"
#include "optim/optim_config.h"

/* Most Transformer layers a model may have (fixed-size per-layer tables in train/model/model.h). */
#define CONFIG_MAX_LAYERS 64

typedef enum { TASK_CLASSIFICATION = 0, TASK_REGRESSION, TASK_SQUAD, TASK_TAGGING } TaskKind;
/* GLUE TSV layouts with their columns and label sets (train/tasks/glue.c); GLUE_NONE: explicit columns */
typedef enum { GLUE_NONE = 0, GLUE_SST2, GLUE_COLA, GLUE_MRPC, GLUE_RTE, GLUE_STSB } GlueTask;
typedef enum { BAD_SKIP = 0, BAD_FATAL } BadExamplePolicy;
/* [data] corpus_format: AUTO decides per file by its name (JSON Lines: *.jsonl, *.json, *.ndjson). */
typedef enum { CORPUS_AUTO = 0, CORPUS_TEXT, CORPUS_JSONL } CorpusFormat;
/* Fine-tuning batches: padded to their longest sequence, or every one to task.max_seq_len. */
/* A batch's layout: padded to its longest sequence, padded to the configured max_seq_len, or
 * unpadded (none: the sequences' rows back to back, train/model/model.h). */
typedef enum { PAD_LONGEST = 0, PAD_MAX_LENGTH, PAD_NONE } PaddingKind;

typedef struct {
    int hidden_size, num_layers, num_heads, intermediate_size;
    int vocab_size, max_position, type_vocab_size;
    int absolute_position; /* bool */
    NormKind norm;
    float hidden_dropout, attention_dropout;
    float layer_norm_eps, init_range;
    int64_t seed;
    RelKind relative_position;
    int relative_k;
    int t5_num_buckets, t5_max_distance; /* relative_position = t5 */
    float rope_theta;                    /* relative_position = rope */
    int residual_attention, residual_attention_mean; /* bools */
} ModelConfig;

typedef struct {
    int batch_size, grad_accum_steps, max_steps, warmup_steps;
    float warmup_proportion; /* > 0: warmup = round(proportion x max_steps), warmup_steps unused */
    ScheduleKind schedule;
    float clip_grad_norm; /* 0 = off */
    int log_interval, eval_interval, checkpoint_interval, keep_last;
    int eval_batches; /* held-out batches per evaluation */
    char run_dir[CONFIG_PATH_MAX];
    int threads; /* 0 = all cores */
    int shard_optimizer; /* bool: ZeRO-1 across MPI ranks */
    Precision precision; /* of the matrix products (core/gemm.h) */
} TrainConfig;

typedef struct {
    char corpus[CONFIG_MAX_FILES][CONFIG_PATH_MAX]; /* files, directories or globs */
    int num_corpus;
    CorpusFormat corpus_format;
    char text_field[CONFIG_PATH_MAX]; /* JSON Lines: the member holding a document's text */
    int64_t shard_tokens;             /* prepare: tokens per shard file (whole documents) */
    int read_chunk_mb;                /* prepare: input bytes tokenized per parallel round */
    char vocab[CONFIG_PATH_MAX];
    char shard_dir[CONFIG_PATH_MAX];
    int do_lower_case; /* bool */
    int max_seq_len;
    float short_seq_prob, masked_lm_prob;
    PaddingKind padding; /* the training and evaluation batches' layout */
    int max_predictions_per_seq;
    int whole_word_mask; /* bool */
    float eval_fraction;
    int64_t seed;
} DataConfig;

/* Fine-tuning (`realpos finetune` / `predict`): the task, its data and its schedule. */
typedef struct {
    TaskKind type;
    GlueTask glue_task;
    char init_checkpoint[CONFIG_PATH_MAX];
    char train_file[CONFIG_PATH_MAX], dev_file[CONFIG_PATH_MAX];
    char test_file[CONFIG_PATH_MAX]; /* scored once after the last step ("": none) */
    /* explicit TSV layout (glue_task = none): 0-based columns, -1 = absent */
    int text_a_column, text_b_column, label_column, num_columns;
    int header;                      /* bool: the first row names the columns */
    char labels[CONFIG_PATH_MAX];    /* classification: the label values, space-separated */
    BadExamplePolicy bad_examples;
    int max_seq_len, batch_size;
    PaddingKind padding;             /* longest: each batch to its longest sequence */
    int group_by_length;             /* bool: training batches of similar lengths */
    float epochs, lr, warmup_proportion;
    int max_steps;                   /* 0: ceil(epochs x sequences / batch_size) */
    int eval_every;                  /* steps between dev evaluations, 0 = only at the end */
    float stop_accuracy;             /* tagging: stop once the dev token accuracy within the training
                                        lengths is >= this at stop_patience evaluations in a row (0: off) */
    int stop_patience;
    int doc_stride, max_query_length, n_best_size, max_answer_length; /* SQuAD */
    int64_t seed;                    /* new-parameter init, data order, dropout */
    char tag_labels[CONFIG_PATH_MAX]; /* tagging: the label set, space-separated ("": the training file's) */
    int train_max_length;             /* tagging: longest training example in words (0: measured) */
} TaskConfig;

typedef struct {
    ModelConfig model;
    OptimConfig optim;
    TrainConfig train;
    DataConfig data;
    TaskConfig task;
    /* Where each schema key got its value; names the origin in validation errors. */
    ConfigOrigins origins;
} Config;

/* The schema of Config (train/config/schema.c). */
extern const ConfigSchema config_schema;

/* The jobs a configuration is loaded for (bits of config_schema.job_names): which keys they read
 * is the schema's KeyUse table; cross-key checks skip keys the job does not read. */
enum { JOB_NONE = 0, JOB_PRETRAIN = 1u << 0, JOB_FINETUNE = 1u << 1 };

/* Fill every key with its default. */
void config_defaults(Config *cfg);
/* Defaults, then the file, then each "section.key=value" override, then cross-key validation,
 * for `job` (JOB_PRETRAIN: pretrain, eval, prepare; JOB_NONE: `realpos config`, every check).
 * Fatal (with FILE:LINE) on any error. */
void config_load(Config *cfg, unsigned job, const char *path, int num_overrides, char *const *overrides);
/* Once per launch, after the config is final (fine-tuning: after config_adopt_model): refuse a
 * --set of a key that does not apply (one the job does not read, naming the key that does the
 * job, or one whose condition is false), warn about such a key set in the file, and about a
 * warm-up that covers more than half of the run. */
void config_report_job(const Config *cfg);
/* Pretraining's warm-up steps: round(train.warmup_proportion x train.max_steps) when the
 * proportion is > 0, else train.warmup_steps. */
int config_warmup_steps(const Config *cfg);
/* config_load of INI text instead of a file: a resumed run's stored configuration, `origin` (the
 * checkpoint) naming its keys in errors, then the overrides; job JOB_FINETUNE checks as
 * config_load_task does. */
void config_load_text(Config *cfg, unsigned job, const char *text, const char *origin, int num_overrides,
                      char *const *overrides);
/* Parse INI text (e.g. the config stored in a checkpoint); `origin` names it in errors. Key ranges
 * and the cross-key checks of [model] only. */
void config_load_string(Config *cfg, const char *text, const char *origin);
/* config_load for commands that use only [model] (init, bench): the cross-key checks of the other
 * sections (e.g. data.max_seq_len <= model.max_position) are not theirs to fail. */
void config_load_model(Config *cfg, const char *path, int num_overrides, char *const *overrides);
/* Cross-key checks (hidden_size % num_heads, ...); fatal with the origin of the offending key. */
void config_validate(const Config *cfg);
/* The full effective configuration as INI text (every key, every section); caller frees. */
char *config_to_ini(const Config *cfg);
/* Enum names, for logs. */
const char *task_kind_name(TaskKind kind);
const char *glue_task_name(GlueTask task);
/* 1 if section.name got its value from a file or --set (not the default). */
int config_key_is_set(const Config *cfg, const char *section, const char *name);
/* Fine-tuning and prediction configs: like config_load, but the cross-key checks of [model] and
 * [data] wait for config_adopt_model, since the model comes from a checkpoint. */
void config_load_task(Config *cfg, const char *path, int num_overrides, char *const *overrides);
/* Fine-tuning: the model is the checkpoint's (`stored`, read from `origin`) with the [model] keys
 * that cfg sets explicitly applied on top; [data] (vocabulary, casing) is the checkpoint's. Only
 * keys that add or resize parameters the loader can initialise, or that touch no parameter, may
 * differ: relative_position, relative_k, t5_num_buckets, t5_max_distance, rope_theta,
 * residual_attention, residual_attention_mean, max_position (grow only), hidden_dropout, attention_dropout, init_range, seed. Any other key set
 * to a value different from the checkpoint's is fatal, naming the key and both values. Then the
 * whole config is validated. */
void config_adopt_model(Config *cfg, const Config *stored, const char *origin);
/* Warn about each key of `section` that cfg sets explicitly (in its file or by --set) to a value
 * other than stored's (a checkpoint's config, stored_origin), ending with `consequence` (e.g.
 * "eval uses the checkpoint's model"); returns how many. */
int config_report_differences(const Config *cfg, const Config *stored, const char *section, const char *stored_origin,
                              const char *consequence);
/* Call visit(key, value in a, value in b, ctx) for every key whose values differ, in schema order;
 * returns their number. */
int config_each_difference(const Config *a, const Config *b,
                           void (*visit)(const KeySpec *key, const char *a_text, const char *b_text, void *ctx),
                           void *ctx);
/* Copy the named keys of `section` from stored into cfg, except those cfg got from --set (the
 * command line wins); a key cfg's file sets to another value is reported as above. */
void config_adopt_keys(Config *cfg, const Config *stored, const char *section, const char *const *names,
                       int num_names, const char *stored_origin, const char *consequence);
/* The first [model] key (in schema order, skipping the names in `ignore`) whose value differs
 * between a and b: true, with "model.KEY" and both values as the INI text prints them, in diff. */
typedef struct {
    char key[64], a[CONFIG_PATH_MAX], b[CONFIG_PATH_MAX];
} ConfigDifference;
bool config_model_difference(const Config *a, const Config *b, const char *const *ignore, int num_ignore,
                             ConfigDifference *diff);
