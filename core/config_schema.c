/* The configuration schema and typed values: the table below is the single description of every
 * key; defaults are INI text parsed like any other value, and error messages and the printed
 * comments are generated from it. */
#include "core/config_schema.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/common.h"

/* Longest string or path value: keeps "longest_key = value" within inih's line buffer
 * (INI_MAX_LINE, which counts '\r', '\n' and '\0'), so config_to_ini output always parses back. */
#define VALUE_TEXT_MAX 160
#define LONGEST_KEY_NAME 23 /* max_predictions_per_seq */
_Static_assert(LONGEST_KEY_NAME + 3 + VALUE_TEXT_MAX + 3 <= INI_MAX_LINE, "values must fit a line");
_Static_assert(VALUE_TEXT_MAX < CONFIG_PATH_MAX, "a value must fit a Config path field");
#define LIST_WRAP_COLUMN 100 /* path lists longer than this continue on indented lines */

_Static_assert(sizeof(NormKind) == sizeof(int) && sizeof(RelKind) == sizeof(int) &&
                   sizeof(ScheduleKind) == sizeof(int) && sizeof(TaskKind) == sizeof(int) &&
                   sizeof(GlueTask) == sizeof(int) && sizeof(BadExamplePolicy) == sizeof(int),
               "enum fields are stored through int");

static const char *const norm_names[] = {"post", "pre", NULL};
static const char *const rel_names[] = {"none",    "shaw",    "method1", "method2",
                                        "method3", "method4", NULL};
static const char *const schedule_names[] = {"linear", "cosine", "constant", NULL};
static const char *const task_names[] = {"classification", "regression", "squad", NULL};
static const char *const glue_names[] = {"none", "sst2", "cola", "mrpc", "rte", "stsb", NULL};
static const char *const bad_example_names[] = {"skip", "fatal", NULL};

/* offsetof that fails to compile unless Config.sec.key has the given type. */
#define FIELD(sec, key, type) _Generic(((Config *)0)->sec.key, type: offsetof(Config, sec.key))
#define INT_KEY(sec, key, def, lo, hi, desc)                                                       \
    {.section = #sec, .name = #key, .type = KEY_INT, .offset = FIELD(sec, key, int),               \
     .fallback = def, .int_min = lo, .int_max = hi, .help = desc}
#define INT64_KEY(sec, key, def, lo, hi, desc)                                                     \
    {.section = #sec, .name = #key, .type = KEY_INT64, .offset = FIELD(sec, key, int64_t),         \
     .fallback = def, .int_min = lo, .int_max = hi, .help = desc}
#define FLOAT_KEY(sec, key, def, lo_bracket, lo, hi, hi_bracket, desc)                             \
    {.section = #sec, .name = #key, .type = KEY_FLOAT, .offset = FIELD(sec, key, float),           \
     .fallback = def, .float_min = lo, .float_max = hi, .min_open = lo_bracket == '(',             \
     .max_open = hi_bracket == ')', .help = desc}
#define BOOL_KEY(sec, key, def, desc)                                                              \
    {.section = #sec, .name = #key, .type = KEY_BOOL, .offset = FIELD(sec, key, int),              \
     .fallback = def, .help = desc}
#define ENUM_KEY(sec, key, enum_type, value_names, def, desc)                                      \
    {.section = #sec, .name = #key, .type = KEY_ENUM, .offset = FIELD(sec, key, enum_type),        \
     .fallback = def, .names = value_names, .help = desc}
#define STRING_KEY(sec, key, def, required, desc)                                                  \
    {.section = #sec, .name = #key, .type = KEY_STRING, .offset = FIELD(sec, key, char *),         \
     .fallback = def, .nonempty = required, .help = desc}
#define PATHS_KEY(sec, key, count, def, desc)                                                      \
    {.section = #sec, .name = #key, .type = KEY_PATHS,                                             \
     .offset = FIELD(sec, key, char(*)[CONFIG_PATH_MAX]), .count_offset = FIELD(sec, count, int), \
     .fallback = def, .help = desc}

const KeySpec config_schema[] = {
    INT_KEY(model, hidden_size, "768", 1, 65536, "width of every hidden state"),
    INT_KEY(model, num_layers, "12", 1, 1024, "number of Transformer layers"),
    INT_KEY(model, num_heads, "12", 1, 65536, "attention heads per layer; must divide hidden_size"),
    INT_KEY(model, intermediate_size, "3072", 1, 1 << 20, "width of the feed-forward layer"),
    INT_KEY(model, vocab_size, "30522", 1, 1 << 24, "rows of the token embedding"),
    INT_KEY(model, max_position, "512", 1, 65536, "rows of the absolute position embedding"),
    INT_KEY(model, type_vocab_size, "2", 1, 1024, "rows of the segment embedding"),
    BOOL_KEY(model, absolute_position, "yes", "add learned absolute position embeddings"),
    ENUM_KEY(model, norm, NormKind, norm_names, "post",
             "layer norm after (post, BERT) or before (pre) each residual branch"),
    FLOAT_KEY(model, hidden_dropout, "0.1", '[', 0, 1, ')', "dropout on embeddings and residuals"),
    FLOAT_KEY(model, attention_dropout, "0.1", '[', 0, 1, ')', "dropout on attention weights"),
    FLOAT_KEY(model, layer_norm_eps, "1e-12", '(', 0, INFINITY, ')',
              "added to the variance in layer norm"),
    FLOAT_KEY(model, init_range, "0.02", '(', 0, INFINITY, ')',
              "standard deviation of the initial weights"),
    INT64_KEY(model, seed, "42", 0, INT64_MAX, "seed of the parameter initialisation"),
    ENUM_KEY(model, relative_position, RelKind, rel_names, "none",
             "relative position scores (Shaw et al. 2018; Huang et al. 2020)"),
    INT_KEY(model, relative_k, "64", 1, 65536, "relative distances are clipped to [-k, k]"),
    BOOL_KEY(model, residual_attention, "no", "RealFormer: add the previous layer's scores"),
    BOOL_KEY(model, residual_attention_mean, "no",
             "RealFormer: scale the carried scores by 1/layer (needs residual_attention)"),

    FLOAT_KEY(optim, lr, "1e-4", '[', 0, INFINITY, ')', "peak learning rate of AdamW"),
    FLOAT_KEY(optim, beta1, "0.9", '[', 0, 1, ')', "decay of the first moment"),
    FLOAT_KEY(optim, beta2, "0.999", '[', 0, 1, ')', "decay of the second moment"),
    FLOAT_KEY(optim, eps, "1e-6", '(', 0, INFINITY, ')', "added to the root of the second moment"),
    FLOAT_KEY(optim, weight_decay, "0.01", '[', 0, INFINITY, ')',
              "decoupled weight decay (not on biases and layer norms)"),
    BOOL_KEY(optim, bias_correction, "yes", "Adam bias correction of both moments"),

    INT_KEY(train, batch_size, "32", 1, 1 << 20, "sequences per micro-batch"),
    INT_KEY(train, grad_accum_steps, "1", 1, 1 << 20, "micro-batches summed per optimizer step"),
    INT_KEY(train, max_steps, "1000", 1, INT_MAX, "optimizer steps of the whole run"),
    INT_KEY(train, warmup_steps, "100", 0, INT_MAX, "steps of linear warmup from 0 to lr"),
    ENUM_KEY(train, schedule, ScheduleKind, schedule_names, "linear",
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

    PATHS_KEY(data, corpus, num_corpus, "",
              "text files, one sentence per line, blank lines between documents"),
    STRING_KEY(data, vocab, "", false, "WordPiece vocabulary, one token per line"),
    STRING_KEY(data, shard_dir, "data/shards", true, "directory of the prepared training shards"),
    BOOL_KEY(data, do_lower_case, "yes", "lowercase and strip accents before WordPiece"),
    INT_KEY(data, max_seq_len, "128", 5, 65536, "tokens per sequence, [CLS] and [SEP]s included"),
    FLOAT_KEY(data, short_seq_prob, "0.1", '[', 0, 1, ']', "chance of a shorter random length"),
    FLOAT_KEY(data, masked_lm_prob, "0.15", '[', 0, 1, ']', "fraction of tokens predicted"),
    INT_KEY(data, max_predictions_per_seq, "20", 1, 65536, "cap on predicted tokens per sequence"),
    BOOL_KEY(data, whole_word_mask, "no", "mask all WordPieces of a word together"),
    FLOAT_KEY(data, eval_fraction, "0.02", '(', 0, 1, ')', "fraction of documents held out"),
    INT64_KEY(data, seed, "12345", 0, INT64_MAX, "seed of the data order and masking"),

    ENUM_KEY(task, type, TaskKind, task_names, "classification",
             "fine-tuning task: [CLS] classification, [CLS] regression (MSE) or SQuAD spans"),
    ENUM_KEY(task, glue_task, GlueTask, glue_names, "none",
             "GLUE TSV layout and labels (sets type); none = the column keys below"),
    STRING_KEY(task, init_checkpoint, "", false, "checkpoint whose encoder fine-tuning starts from"),
    STRING_KEY(task, train_file, "", false, "training data (GLUE TSV or SQuAD v1.1 JSON)"),
    STRING_KEY(task, dev_file, "", false, "evaluation data, same format"),
    INT_KEY(task, text_a_column, "0", 0, 255, "TSV column of the first text (0-based)"),
    INT_KEY(task, text_b_column, "-1", -1, 255, "TSV column of the second text (-1 = single text)"),
    INT_KEY(task, label_column, "1", -1, 255, "TSV column of the label (-1 = unlabelled)"),
    INT_KEY(task, num_columns, "0", 0, 256, "columns of every TSV row (0 = as in the first row)"),
    BOOL_KEY(task, header, "yes", "the first TSV row is a header"),
    STRING_KEY(task, labels, "0 1", false, "classification label values, space-separated"),
    ENUM_KEY(task, bad_examples, BadExamplePolicy, bad_example_names, "skip",
             "malformed rows or questions: report and skip, or stop"),
    INT_KEY(task, max_seq_len, "128", 8, 65536, "tokens per sequence, [CLS] and [SEP]s included"),
    INT_KEY(task, batch_size, "32", 1, 1 << 20, "sequences per step (and per evaluation batch)"),
    FLOAT_KEY(task, epochs, "3", '(', 0, 1000, ']', "passes over the training data (may be fractional)"),
    INT_KEY(task, max_steps, "0", 0, INT_MAX, "stop after this many steps (0 = as epochs give)"),
    FLOAT_KEY(task, lr, "5e-5", '(', 0, INFINITY, ')', "peak learning rate (AdamW as [optim])"),
    FLOAT_KEY(task, warmup_proportion, "0.1", '[', 0, 1, ']',
              "fraction of the steps with linear warmup, then linear decay to 0"),
    INT_KEY(task, doc_stride, "128", 1, 65536, "SQuAD: tokens between the starts of context windows"),
    INT_KEY(task, max_query_length, "64", 1, 65536, "SQuAD: question tokens kept"),
    INT_KEY(task, n_best_size, "20", 1, 1000, "SQuAD: start and end candidates per window"),
    INT_KEY(task, max_answer_length, "30", 1, 65536, "SQuAD: longest predicted answer in tokens"),
    INT64_KEY(task, seed, "42", 0, INT64_MAX, "seed of new parameters, data order and dropout"),
};
const int config_num_keys = (int)(sizeof config_schema / sizeof config_schema[0]);
_Static_assert(sizeof config_schema / sizeof config_schema[0] <= CONFIG_MAX_KEYS,
               "raise CONFIG_MAX_KEYS");

static const char *const section_names[] = {"model", "optim", "train", "data", "task"};
#define NUM_SECTIONS ((int)(sizeof section_names / sizeof section_names[0]))

const char *rel_kind_name(RelKind kind) {
    return (unsigned)kind < sizeof rel_names / sizeof rel_names[0] - 1 ? rel_names[kind] : "?";
}

const char *task_kind_name(TaskKind kind) {
    return (unsigned)kind < sizeof task_names / sizeof task_names[0] - 1 ? task_names[kind] : "?";
}

const char *glue_task_name(GlueTask task) {
    return (unsigned)task < sizeof glue_names / sizeof glue_names[0] - 1 ? glue_names[task] : "?";
}

void config_describe_expected(const KeySpec *key, char *out, size_t size) {
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64:
        if (key->int_max == INT_MAX || key->int_max == INT64_MAX)
            snprintf(out, size, "an integer >= %lld", (long long)key->int_min);
        else
            snprintf(out, size, "an integer in [%lld, %lld]", (long long)key->int_min,
                     (long long)key->int_max);
        break;
    case KEY_FLOAT:
        if (isinf(key->float_max))
            snprintf(out, size, "a number %s %g", key->min_open ? ">" : ">=", key->float_min);
        else
            snprintf(out, size, "a number in %c%g, %g%c", key->min_open ? '(' : '[', key->float_min,
                     key->float_max, key->max_open ? ')' : ']');
        break;
    case KEY_BOOL: snprintf(out, size, "yes or no"); break;
    case KEY_ENUM: {
        size_t used = (size_t)snprintf(out, size, "one of");
        for (int i = 0; key->names[i] && used < size; i++)
            used += (size_t)snprintf(out + used, size - used, "%s %s", i ? "," : "", key->names[i]);
        break;
    }
    case KEY_STRING:
        snprintf(out, size, "a path of at most %d characters without ';'%s", VALUE_TEXT_MAX,
                 key->nonempty ? ", not empty" : "");
        break;
    case KEY_PATHS:
        snprintf(out, size, "up to %d space-separated paths of at most %d characters without ';', "
                 "'=' or ':'", CONFIG_MAX_FILES, VALUE_TEXT_MAX);
        break;
    }
}

static bool parse_integer(const char *text, int64_t *out) {
    if (!*text || isspace((unsigned char)*text))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    *out = v;
    return errno == 0 && *end == '\0';
}

static bool parse_float(const char *text, float *out) {
    if (!*text || isspace((unsigned char)*text))
        return false;
    char *end;
    errno = 0;
    *out = strtof(text, &end);
    return errno == 0 && *end == '\0' && isfinite(*out);
}

static bool in_float_range(const KeySpec *key, float v) {
    bool above = key->min_open ? v > key->float_min : v >= key->float_min;
    bool below = key->max_open ? v < key->float_max : v <= key->float_max;
    return above && below;
}

static bool valid_path_text(const char *text, size_t length, bool in_list) {
    if (length > VALUE_TEXT_MAX || (in_list && text[0] == '#'))
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == 0x7f || c == ';' || (in_list && (c == '=' || c == ':')))
            return false;
    }
    return true;
}

bool config_set_value(Config *cfg, const KeySpec *key, const char *text, bool append, char *why,
                      size_t why_size) {
    void *field = (char *)cfg + key->offset;
    char expected[256];
    config_describe_expected(key, expected, sizeof expected);
    bool ok = false;
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64: {
        int64_t v;
        ok = parse_integer(text, &v) && v >= key->int_min && v <= key->int_max;
        if (ok && key->type == KEY_INT)
            *(int *)field = (int)v;
        else if (ok)
            *(int64_t *)field = v;
        break;
    }
    case KEY_FLOAT: {
        float v;
        ok = parse_float(text, &v) && in_float_range(key, v);
        if (ok)
            *(float *)field = v;
        break;
    }
    case KEY_BOOL:
        ok = true;
        if (!strcmp(text, "yes") || !strcmp(text, "true"))
            *(int *)field = 1;
        else if (!strcmp(text, "no") || !strcmp(text, "false"))
            *(int *)field = 0;
        else
            ok = false;
        break;
    case KEY_ENUM:
        for (int i = 0; key->names[i] && !ok; i++)
            if (!strcmp(text, key->names[i])) {
                *(int *)field = i;
                ok = true;
            }
        break;
    case KEY_STRING:
        ok = valid_path_text(text, strlen(text), false) && (*text || !key->nonempty);
        if (ok) {
            memset(field, 0, CONFIG_PATH_MAX); /* whole field, so equal configs compare equal */
            memcpy(field, text, strlen(text));
        }
        break;
    case KEY_PATHS: {
        char(*paths)[CONFIG_PATH_MAX] = field;
        int *count = (int *)((char *)cfg + key->count_offset);
        if (!append) {
            memset(paths, 0, CONFIG_MAX_FILES * sizeof paths[0]);
            *count = 0;
        }
        ok = true;
        for (const char *s = text; ok && *s;) {
            size_t skip = strspn(s, " \t\r\n\v\f"), length = strcspn(s + skip, " \t\r\n\v\f");
            s += skip;
            if (!length)
                break;
            ok = *count < CONFIG_MAX_FILES && valid_path_text(s, length, true);
            if (ok)
                memcpy(paths[(*count)++], s, length);
            s += length;
        }
        break;
    }
    }
    if (!ok)
        snprintf(why, why_size, "key '%s.%s': expected %s, got '%.200s'", key->section, key->name,
                 expected, text);
    return ok;
}

int config_find_key(const char *section, const char *name, char *why, size_t why_size) {
    bool known_section = false;
    for (int s = 0; s < NUM_SECTIONS; s++)
        known_section |= !strcmp(section, section_names[s]);
    if (!*section) {
        snprintf(why, why_size, "key '%s': expected it under a [section] header ([model], [optim], "
                 "[train], [data] or [task]), got it before the first header", name);
        return -1;
    }
    if (!known_section) {
        snprintf(why, why_size, "key '%s.%s': expected a section among [model], [optim], [train], "
                 "[data], [task], got [%s]", section, name, section);
        return -1;
    }
    for (int k = 0; k < config_num_keys; k++)
        if (!strcmp(section, config_schema[k].section) && !strcmp(name, config_schema[k].name))
            return k;
    size_t used = (size_t)snprintf(why, why_size, "key '%s.%s': expected one of", section, name);
    for (int k = 0, first = 1; k < config_num_keys && used < why_size; k++)
        if (!strcmp(section, config_schema[k].section)) {
            used += (size_t)snprintf(why + used, why_size - used, "%s %s", first ? "" : ",",
                                     config_schema[k].name);
            first = 0;
        }
    if (used < why_size)
        snprintf(why + used, why_size - used, ", got '%s'", name);
    return -1;
}

/* Shortest %g form that reads back as the same float (at most 9 significant digits). */
static void format_float(char *out, size_t size, float v) {
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(out, size, "%.*g", digits, (double)v);
        if (strtof(out, NULL) == v)
            return;
    }
}

void config_print_value(FILE *out, const Config *cfg, const KeySpec *key) {
    const void *field = (const char *)cfg + key->offset;
    char number[64];
    switch (key->type) {
    case KEY_INT: fprintf(out, " %d", *(const int *)field); break;
    case KEY_INT64: fprintf(out, " %lld", (long long)*(const int64_t *)field); break;
    case KEY_FLOAT:
        format_float(number, sizeof number, *(const float *)field);
        fprintf(out, " %s", number);
        break;
    case KEY_BOOL: fprintf(out, " %s", *(const int *)field ? "yes" : "no"); break;
    case KEY_ENUM: fprintf(out, " %s", key->names[*(const int *)field]); break;
    case KEY_STRING:
        if (*(const char *)field)
            fprintf(out, " %s", (const char *)field);
        break;
    case KEY_PATHS: {
        const char(*paths)[CONFIG_PATH_MAX] = field;
        int count = *(const int *)((const char *)cfg + key->count_offset);
        size_t column = strlen(key->name) + 2;
        for (int i = 0; i < count; i++) {
            size_t length = strlen(paths[i]);
            if (i && column + 1 + length > LIST_WRAP_COLUMN) {
                fprintf(out, "\n   "); /* an indented line continues the list */
                column = 3;
            }
            fprintf(out, " %s", paths[i]);
            column += 1 + length;
        }
        break;
    }
    }
}

