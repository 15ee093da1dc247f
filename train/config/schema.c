/* The schema of Config: one row per section.key with its type, default, range and help text.
 * Defaults are INI text parsed like any other value; error messages and the comments of
 * `realpos config` are generated from these rows by core/config/config_schema.c. */
#include "train/config/config.h"

#include <limits.h>
#include <math.h>

#include "core/common.h"
#include "core/gemm.h"
#include "layers/attention.h"
#include "layers/encoder.h"
#include "optim/adamw.h"

_Static_assert(sizeof(NormKind) == sizeof(int) && sizeof(RelKind) == sizeof(int) &&
                   sizeof(ScheduleKind) == sizeof(int) && sizeof(TaskKind) == sizeof(int) &&
                   sizeof(GlueTask) == sizeof(int) && sizeof(BadExamplePolicy) == sizeof(int) &&
                   sizeof(CorpusFormat) == sizeof(int) &&
                   sizeof(PaddingKind) == sizeof(int) && sizeof(Precision) == sizeof(int),
               "enum fields are stored through int");

static const char *const task_names[] = {"classification", "regression", "squad", "tagging", NULL};
static const char *const glue_names[] = {"none", "sst2", "cola", "mrpc", "rte", "stsb", NULL};
static const char *const bad_example_names[] = {"skip", "fatal", NULL};
static const char *const corpus_format_names[] = {"auto", "text", "jsonl", NULL};
static const char *const padding_names[] = {"longest", "max_length", "none", NULL};

#define INT_KEY(...) CONFIG_INT_KEY(Config, __VA_ARGS__)
#define INT64_KEY(...) CONFIG_INT64_KEY(Config, __VA_ARGS__)
#define FLOAT_KEY(...) CONFIG_FLOAT_KEY(Config, __VA_ARGS__)
#define BOOL_KEY(...) CONFIG_BOOL_KEY(Config, __VA_ARGS__)
#define ENUM_KEY(...) CONFIG_ENUM_KEY(Config, __VA_ARGS__)
#define STRING_KEY(...) CONFIG_STRING_KEY(Config, __VA_ARGS__)
#define PATHS_KEY(...) CONFIG_PATHS_KEY(Config, __VA_ARGS__)
#define WORDS_KEY(...) CONFIG_WORDS_KEY(Config, __VA_ARGS__)

static const KeySpec keys[] = {
    INT_KEY(model, hidden_size, "768", 1, 65536, "width of every hidden state"),
    INT_KEY(model, num_layers, "12", 1, CONFIG_MAX_LAYERS, "number of Transformer layers"),
    INT_KEY(model, num_heads, "12", 1, 65536, "attention heads per layer; must divide hidden_size"),
    INT_KEY(model, intermediate_size, "3072", 1, 1 << 20, "width of the feed-forward layer"),
    INT_KEY(model, vocab_size, "30522", 1, 1 << 24, "rows of the token embedding"),
    INT_KEY(model, max_position, "512", 1, 65536, "rows of the absolute position embedding"),
    INT_KEY(model, type_vocab_size, "2", 1, 1024, "rows of the segment embedding"),
    BOOL_KEY(model, absolute_position, "yes", "add learned absolute position embeddings"),
    ENUM_KEY(model, norm, NormKind, norm_kind_names, "post",
             "layer norm after (post, BERT) or before (pre) each residual branch"),
    FLOAT_KEY(model, hidden_dropout, "0.1", '[', 0, 1, ')', "dropout on embeddings and residuals"),
    FLOAT_KEY(model, attention_dropout, "0.1", '[', 0, 1, ')', "dropout on attention weights"),
    FLOAT_KEY(model, layer_norm_eps, "1e-12", '(', 0, 1, ']',
              "added to the variance in layer norm"),
    FLOAT_KEY(model, init_range, "0.02", '(', 0, 1, ']',
              "standard deviation of the initial weights"),
    INT64_KEY(model, seed, "42", 0, INT64_MAX, "seed of the parameter initialisation"),
    ENUM_KEY(model, relative_position, RelKind, rel_kind_names, "none",
             "relative position scores (Shaw et al. 2018; Huang et al. 2020)"),
    INT_KEY(model, relative_k, "64", 1, 65536, "relative distances are clipped to [-k, k]"),
    INT_KEY(model, t5_num_buckets, "32", 4, 65536,
            "t5: buckets of the shared relative attention bias (even; half per direction)"),
    INT_KEY(model, t5_max_distance, "128", 2, 1 << 24,
            "t5: distance where the log-spaced buckets end (> t5_num_buckets / 4)"),
    FLOAT_KEY(model, rope_theta, "10000", '(', 0, INFINITY, ')',
              "rope: base of the rotation frequencies theta^(-2t/d) (head width must be even)"),
    BOOL_KEY(model, residual_attention, "no", "RealFormer: add the previous layer's scores"),
    BOOL_KEY(model, residual_attention_mean, "no",
             "RealFormer: scale the carried scores by 1/layer (needs residual_attention)"),

    FLOAT_KEY(optim, lr, "1e-4", '[', 0, 1, ']', "peak learning rate of AdamW"),
    FLOAT_KEY(optim, beta1, "0.9", '[', 0, 1, ')', "decay of the first moment"),
    FLOAT_KEY(optim, beta2, "0.999", '[', 0, 1, ')', "decay of the second moment"),
    FLOAT_KEY(optim, eps, "1e-6", '(', 0, 1, ']', "added to the root of the second moment"),
    FLOAT_KEY(optim, weight_decay, "0.01", '[', 0, 1, ']',
              "decoupled weight decay (not on biases and layer norms)"),
    BOOL_KEY(optim, bias_correction, "yes", "Adam bias correction of both moments"),

    INT_KEY(train, batch_size, "32", 1, 1 << 20, "sequences per micro-batch"),
    INT_KEY(train, grad_accum_steps, "1", 1, 1 << 20,
            "micro-batches per optimizer step: the global batch is batch_size x grad_accum_steps at any "
            "number of MPI ranks, which share the micro-batches"),
    INT_KEY(train, max_steps, "1000", 1, INT_MAX, "optimizer steps of the whole run"),
    INT_KEY(train, warmup_steps, "100", 0, INT_MAX, "steps of linear warmup from 0 to lr"),
    FLOAT_KEY(train, warmup_proportion, "0", '[', 0, 1, ']',
              "warmup as a fraction of max_steps, rounded to a step (0 = warmup_steps gives it)"),
    ENUM_KEY(train, schedule, ScheduleKind, schedule_kind_names, "linear",
             "after warmup: linear or cosine decay to 0 at max_steps, or constant"),
    FLOAT_KEY(train, clip_grad_norm, "1.0", '[', 0, INFINITY, ')',
              "clip the global gradient norm to this value (0 = off)"),
    INT_KEY(train, log_interval, "10", 1, INT_MAX, "steps between log lines"),
    INT_KEY(train, eval_interval, "200", 1, INT_MAX, "steps between held-out evaluations"),
    INT_KEY(train, checkpoint_interval, "500", 1, INT_MAX, "steps between checkpoints"),
    INT_KEY(train, keep_last, "2", 1, INT_MAX, "checkpoints kept in run_dir"),
    INT_KEY(train, eval_batches, "20", 1, INT_MAX, "held-out batches per evaluation"),
    STRING_KEY(train, run_dir, "runs/default", true, "directory of logs and checkpoints"),
    INT_KEY(train, threads, "0", 0, 4096, "worker threads (0 = all cores)"),
    BOOL_KEY(train, shard_optimizer, "no",
             "under MPI, ZeRO-1: each rank keeps the AdamW moments of 1/N of the parameters"),
    ENUM_KEY(train, precision, Precision, precision_names, "fp32",
             "matrix products: fp32, or bf16 operands with fp32 accumulation (needs avx512_bf16 or amx_bf16)"),

    PATHS_KEY(data, corpus, num_corpus, "",
              "corpus files, directories (every file below) or globs; gzip or zstd detected by content"),
    ENUM_KEY(data, corpus_format, CorpusFormat, corpus_format_names, "auto",
             "text: a sentence per line, blank lines between documents; jsonl: a document per line; "
             "auto: jsonl for names ending .jsonl/.json/.ndjson (before .gz/.zst)"),
    STRING_KEY(data, text_field, "text", true, "JSON Lines: the string member holding the text"),
    INT64_KEY(data, shard_tokens, "33554432", 1, INT32_MAX,
              "prepare: tokens per shard file (whole documents; 4 bytes each in memory)"),
    INT_KEY(data, read_chunk_mb, "32", 1, 4096,
            "prepare: MB of input tokenized per parallel round (about 3x this in memory)"),
    STRING_KEY(data, vocab, "", false, "WordPiece vocabulary, one token per line"),
    STRING_KEY(data, shard_dir, "data/shards", true, "directory of the prepared training shards"),
    BOOL_KEY(data, do_lower_case, "yes", "lowercase and strip accents before WordPiece"),
    INT_KEY(data, max_seq_len, "128", 5, 65536, "tokens per sequence, [CLS] and [SEP]s included"),
    FLOAT_KEY(data, short_seq_prob, "0.1", '[', 0, 1, ']', "chance of a shorter random length"),
    ENUM_KEY(data, padding, PaddingKind, padding_names, "none",
             "unpadded (none), or rows padded to the batch's longest (longest) or to data.max_seq_len (max_length)"),
    FLOAT_KEY(data, masked_lm_prob, "0.15", '[', 0, 1, ']', "fraction of tokens predicted"),
    INT_KEY(data, max_predictions_per_seq, "20", 1, 65536, "cap on predicted tokens per sequence"),
    BOOL_KEY(data, whole_word_mask, "no", "mask all WordPieces of a word together"),
    FLOAT_KEY(data, eval_fraction, "0.02", '(', 0, 1, ')', "fraction of documents held out"),
    INT64_KEY(data, seed, "12345", 0, INT64_MAX, "seed of the data order and masking"),

    ENUM_KEY(task, type, TaskKind, task_names, "classification",
             "fine-tuning task: [CLS] classification, [CLS] regression (MSE), SQuAD spans or tagging (a label per word)"),
    ENUM_KEY(task, glue_task, GlueTask, glue_names, "none",
             "GLUE TSV layout and labels (sets type); none = the column keys below"),
    STRING_KEY(task, init_checkpoint, "", false, "checkpoint whose encoder fine-tuning starts from"),
    STRING_KEY(task, train_file, "", false, "training data (GLUE TSV or SQuAD v1.1 JSON)"),
    STRING_KEY(task, dev_file, "", false, "evaluation data, same format"),
    STRING_KEY(task, test_file, "", false,
               "test data, same format: scored once with the final weights (a task_test record), never during training"),
    INT_KEY(task, text_a_column, "0", 0, 255, "TSV column of the first text (0-based)"),
    INT_KEY(task, text_b_column, "-1", -1, 255, "TSV column of the second text (-1 = single text)"),
    INT_KEY(task, label_column, "1", -1, 255, "TSV column of the label (-1 = unlabelled)"),
    INT_KEY(task, num_columns, "0", 0, 256, "columns of every TSV row (0 = as in the first row)"),
    BOOL_KEY(task, header, "yes", "the first TSV row is a header"),
    STRING_KEY(task, labels, "0 1", false, "classification label values, space-separated"),
    ENUM_KEY(task, bad_examples, BadExamplePolicy, bad_example_names, "skip",
             "malformed rows or questions: report and skip, or stop"),
    INT_KEY(task, max_seq_len, "128", 8, 65536, "tokens per sequence, [CLS] and [SEP]s included"),
    INT_KEY(task, batch_size, "32", 1, 1 << 20,
            "sequences per micro-batch (and per evaluation batch); train.grad_accum_steps micro-batches per step"),
    ENUM_KEY(task, padding, PaddingKind, padding_names, "none",
             "unpadded (none), or each batch padded to its longest sequence (longest) or to task.max_seq_len"),
    BOOL_KEY(task, group_by_length, "no",
             "training batches of sequences of similar length (shuffled batches of length-sorted chunks)"),
    FLOAT_KEY(task, epochs, "3", '(', 0, 1000, ']', "passes over the training data (may be fractional)"),
    INT_KEY(task, max_steps, "0", 0, INT_MAX, "stop after this many steps (0 = as epochs give)"),
    INT_KEY(task, eval_every, "0", 0, INT_MAX,
            "steps between dev evaluations (0 = only at the end); the best by the task metric is kept"),
    FLOAT_KEY(task, stop_accuracy, "0", '[', 0, 1, ']',
              "tagging: stop when the dev token accuracy within the training lengths is >= this at "
              "task.stop_patience evaluations in a row (0: train to the end)"),
    INT_KEY(task, stop_patience, "3", 1, 1000000, "tagging: evaluations in a row at task.stop_accuracy that stop the run"),
    FLOAT_KEY(task, lr, "5e-5", '(', 0, 1, ']', "peak learning rate (AdamW as [optim])"),
    FLOAT_KEY(task, warmup_proportion, "0.1", '[', 0, 1, ']',
              "fraction of the steps with linear warmup, then linear decay to 0"),
    INT_KEY(task, doc_stride, "128", 1, 65536, "SQuAD: tokens between the starts of context windows"),
    INT_KEY(task, max_query_length, "64", 1, 65536, "SQuAD: question tokens kept"),
    INT_KEY(task, n_best_size, "20", 1, 1000, "SQuAD: start and end candidates per window"),
    INT_KEY(task, max_answer_length, "30", 1, 65536, "SQuAD: longest predicted answer in tokens"),
    INT64_KEY(task, seed, "42", 0, INT64_MAX, "seed of new parameters, data order and dropout"),
    WORDS_KEY(task, tag_labels, "",
              "tagging: the label set, space-separated (empty: the training file's labels, sorted)"),
    INT_KEY(task, train_max_length, "0", 0, 1 << 24,
            "tagging: longest training example in words, the edge of the length buckets (0: measured)"),
};

_Static_assert(sizeof keys / sizeof keys[0] <= CONFIG_MAX_KEYS, "raise CONFIG_MAX_KEYS");

/* Which job reads each key and when it applies (core/config/config_schema.h: KeyUse). A key without a
 * row is read by pretraining and fine-tuning alike and always matters. A row is one line: a key
 * that matters only for some values of another (e.g. a position mode's own parameters) adds
 *     {"model.NEW_KEY", 0, "model.relative_position = MODE", NULL, NULL},
 * and `realpos config` marks it, launches warn when it is set but does not apply, and the cross-key
 * checks of config.c skip it. */
#define PRETRAINING JOB_PRETRAIN
#define FINE_TUNING JOB_FINETUNE
static const char *const job_names[] = {"pretraining", "fine-tuning", NULL};

static const KeyUse key_uses[] = {
    {"model.relative_k", 0, "model.relative_position = shaw | method1 | method2 | method3 | method4", NULL, NULL},
    {"model.t5_num_buckets", 0, "model.relative_position = t5", NULL, NULL},
    {"model.t5_max_distance", 0, "model.relative_position = t5", NULL, NULL},
    {"model.rope_theta", 0, "model.relative_position = rope", NULL, NULL},
    {"model.residual_attention_mean", 0, "model.residual_attention = yes", NULL, NULL},

    {"optim.lr", PRETRAINING, NULL, "task.lr", NULL},

    {"train.batch_size", PRETRAINING, NULL, "task.batch_size", NULL},
    {"train.max_steps", PRETRAINING, NULL, "task.max_steps", NULL},
    {"train.warmup_steps", PRETRAINING, "train.warmup_proportion = 0", "task.warmup_proportion", NULL},
    {"train.warmup_proportion", PRETRAINING, NULL, "task.warmup_proportion", NULL},
    {"train.schedule", PRETRAINING, NULL, NULL, NULL},
    {"train.eval_interval", PRETRAINING, NULL, "task.eval_every", NULL},
    {"train.eval_batches", PRETRAINING, NULL, "task.dev_file", NULL},

    /* fine-tuning reads the checkpoint's [data] (vocabulary and casing); a model fine-tuned from scratch
     * (task.init_checkpoint = none) reads data.vocab and data.do_lower_case */
    {"data.corpus", PRETRAINING, NULL, "task.train_file", NULL},
    {"data.corpus_format", PRETRAINING, NULL, NULL, NULL},
    {"data.text_field", PRETRAINING, NULL, NULL, NULL},
    {"data.shard_tokens", PRETRAINING, NULL, NULL, NULL},
    {"data.read_chunk_mb", PRETRAINING, NULL, NULL, NULL},
    {"data.vocab", PRETRAINING, NULL, NULL, "task.init_checkpoint = none"}, /* a fresh model's vocabulary */
    {"data.shard_dir", PRETRAINING, NULL, NULL, NULL},
    {"data.do_lower_case", PRETRAINING, NULL, NULL, "task.init_checkpoint = none"},
    {"data.max_seq_len", PRETRAINING, NULL, "task.max_seq_len", NULL},
    {"data.short_seq_prob", PRETRAINING, NULL, NULL, NULL},
    {"data.padding", PRETRAINING, NULL, "task.padding", NULL},
    {"data.masked_lm_prob", PRETRAINING, NULL, NULL, NULL},
    {"data.max_predictions_per_seq", PRETRAINING, NULL, NULL, NULL},
    {"data.whole_word_mask", PRETRAINING, NULL, NULL, NULL},
    {"data.eval_fraction", PRETRAINING, NULL, NULL, NULL},
    {"data.seed", PRETRAINING, NULL, "task.seed", NULL},

    {"task.type", FINE_TUNING, NULL, NULL, NULL},
    {"task.glue_task", FINE_TUNING, NULL, NULL, NULL},
    {"task.init_checkpoint", FINE_TUNING, NULL, NULL, NULL},
    {"task.train_file", FINE_TUNING, NULL, "data.corpus", NULL},
    {"task.dev_file", FINE_TUNING, NULL, NULL, NULL},
    {"task.test_file", FINE_TUNING, NULL, NULL, NULL},
    {"task.text_a_column", FINE_TUNING, "task.glue_task = none and task.type = classification | regression", NULL, NULL},
    {"task.text_b_column", FINE_TUNING, "task.glue_task = none and task.type = classification | regression", NULL, NULL},
    {"task.label_column", FINE_TUNING, "task.glue_task = none and task.type = classification | regression", NULL, NULL},
    {"task.num_columns", FINE_TUNING, "task.glue_task = none and task.type = classification | regression", NULL, NULL},
    {"task.header", FINE_TUNING, "task.glue_task = none and task.type = classification | regression", NULL, NULL},
    {"task.labels", FINE_TUNING, "task.glue_task = none and task.type = classification", NULL, NULL},
    {"task.bad_examples", FINE_TUNING, NULL, NULL, NULL},
    {"task.max_seq_len", FINE_TUNING, NULL, "data.max_seq_len", NULL},
    {"task.batch_size", FINE_TUNING, NULL, "train.batch_size", NULL},
    {"task.padding", FINE_TUNING, NULL, "data.padding", NULL},
    {"task.group_by_length", FINE_TUNING, NULL, NULL, NULL},
    {"task.epochs", FINE_TUNING, NULL, "train.max_steps", NULL},
    {"task.max_steps", FINE_TUNING, NULL, "train.max_steps", NULL},
    {"task.eval_every", FINE_TUNING, NULL, "train.eval_interval", NULL},
    {"task.stop_accuracy", FINE_TUNING, "task.type = tagging", NULL, NULL},
    {"task.stop_patience", FINE_TUNING, "task.type = tagging", NULL, NULL},
    {"task.lr", FINE_TUNING, NULL, "optim.lr", NULL},
    {"task.warmup_proportion", FINE_TUNING, NULL, "train.warmup_proportion", NULL},
    {"task.doc_stride", FINE_TUNING, "task.type = squad", NULL, NULL},
    {"task.max_query_length", FINE_TUNING, "task.type = squad", NULL, NULL},
    {"task.n_best_size", FINE_TUNING, "task.type = squad", NULL, NULL},
    {"task.max_answer_length", FINE_TUNING, "task.type = squad", NULL, NULL},
    {"task.seed", FINE_TUNING, NULL, NULL, NULL},
    {"task.tag_labels", FINE_TUNING, "task.type = tagging", NULL, NULL},
    {"task.train_max_length", FINE_TUNING, "task.type = tagging", NULL, NULL},
};

static const char *const sections[] = {"model", "optim", "train", "data", "task"};

const ConfigSchema config_schema = {
    .sections = sections,
    .num_sections = (int)(sizeof sections / sizeof sections[0]),
    .keys = keys,
    .num_keys = (int)(sizeof keys / sizeof keys[0]),
    .values_size = sizeof(Config),
    .origins_offset = offsetof(Config, origins),
    .job_names = job_names,
    .uses = key_uses,
    .num_uses = (int)(sizeof key_uses / sizeof key_uses[0]),
};

const char *task_kind_name(TaskKind kind) { return enum_name(task_names, (int)kind); }

const char *glue_task_name(GlueTask task) { return enum_name(glue_names, (int)task); }
