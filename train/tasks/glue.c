/* GLUE TSV reading and prediction files (glue.h). */
#include "train/tasks/glue.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/io/atomic_file.h"
#include "core/io/files.h"

GlueLayout glue_layout(const TaskConfig *task) {
    GlueLayout g;
    memset(&g, 0, sizeof g);
    g.task = task->glue_task;
    const char *labels = "0 1";
    switch (task->glue_task) {
    case GLUE_SST2: g = (GlueLayout){GLUE_SST2, TASK_CLASSIFICATION, 0, -1, 1, 2, 1, 0, {{0}}}; break;
    case GLUE_COLA: g = (GlueLayout){GLUE_COLA, TASK_CLASSIFICATION, 3, -1, 1, 4, 0, 0, {{0}}}; break;
    case GLUE_MRPC: g = (GlueLayout){GLUE_MRPC, TASK_CLASSIFICATION, 3, 4, 0, 5, 1, 0, {{0}}}; break;
    case GLUE_RTE:
        g = (GlueLayout){GLUE_RTE, TASK_CLASSIFICATION, 1, 2, 3, 4, 1, 0, {{0}}};
        labels = "entailment not_entailment";
        break;
    case GLUE_STSB: g = (GlueLayout){GLUE_STSB, TASK_REGRESSION, 7, 8, 9, 10, 1, 0, {{0}}}; break;
    case GLUE_NONE:
        g = (GlueLayout){GLUE_NONE, task->type, task->text_a_column, task->text_b_column, task->label_column,
                         task->num_columns, task->header, 0, {{0}}};
        labels = task->labels;
        break;
    }
    if (g.type != TASK_CLASSIFICATION)
        return g;
    for (const char *s = labels; *s;) {
        s += strspn(s, " \t");
        size_t n = strcspn(s, " \t");
        if (!n)
            break;
        RP_CHECK(g.num_labels < GLUE_MAX_LABELS, "task.labels: expected at most %d labels", GLUE_MAX_LABELS);
        RP_CHECK(n < GLUE_LABEL_MAX, "task.labels: expected labels of at most %d bytes, got '%.*s'",
                 GLUE_LABEL_MAX - 1, (int)n, s);
        for (int i = 0; i < g.num_labels; i++)
            RP_CHECK(strlen(g.label_names[i]) != n || memcmp(g.label_names[i], s, n),
                     "task.labels: expected distinct labels, got '%.*s' twice in \"%s\"", (int)n, s, labels);
        memcpy(g.label_names[g.num_labels++], s, n);
        s += n;
    }
    RP_CHECK(g.num_labels >= 2, "task.labels: expected at least 2 labels for classification, got \"%s\"", labels);
    return g;
}

/* Split a line in place at tabs; returns the number of columns (cols gets at most max). */
static int split_columns(char *line, char **cols, int max) {
    int n = 0;
    for (char *s = line;; s++) {
        if (n < max)
            cols[n] = s;
        n++;
        s = strchr(s, '\t');
        if (!s)
            break;
        *s = '\0';
    }
    return n;
}

static int label_index(const GlueLayout *g, const char *text) {
    for (int i = 0; i < g->num_labels; i++)
        if (!strcmp(g->label_names[i], text))
            return i;
    return -1;
}

static int tokenize(const Tokenizer *tok, const char *text, int *ids, int capacity) {
    size_t n = tokenizer_encode(tok, text, strlen(text), ids, (size_t)capacity);
    return n < (size_t)capacity ? (int)n : capacity;
}

int glue_load(TaskFeatures *f, const GlueLayout *g, const char *path, const Tokenizer *tok,
              BadExamplePolicy policy) {
    size_t size;
    char *text = read_file(path, &size, "GLUE TSV (task.train_file / dev_file / --input)");
    RP_CHECK(strlen(text) == size, "%s: expected UTF-8 text, got a NUL byte", path);
    char *s = text;
    if (size >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
        s += 3;
    int L = f->L, expected_columns = g->num_columns, rows = 0, line_no = 0, textless = 0;
    int *a = xmalloc(sizeof(int) * (size_t)L), *b = xmalloc(sizeof(int) * (size_t)L);
    SpecialTokens sp = tokenizer_special(tok);
    BadExamples bad = {policy, path, 0};
    char *cols[256];
    while (*s) {
        char *line = s, *newline = strchr(s, '\n');
        s = newline ? newline + 1 : s + strlen(s);
        if (newline)
            *newline = '\0';
        line_no++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[--len] = '\0';
        int n = split_columns(line, cols, 256);
        if (!expected_columns) {
            expected_columns = n;
            int highest = g->text_a > g->text_b ? g->text_a : g->text_b;
            highest = highest > g->label ? highest : g->label;
            RP_CHECK(highest < n, "%s: line %d has %d columns, but the task reads column %d (0-based); set task.glue_task "
                     "or the task.*_column keys for this file's layout", path, line_no, n, highest);
        }
        if (line_no == 1 && g->header)
            continue;
        int row = rows++;
        if (n != expected_columns) {
            bad_example(&bad, "line %d: expected %d tab-separated columns, got %d", line_no, expected_columns, n);
            continue;
        }
        int label = -1;
        float value = NAN;
        if (g->label >= 0 && g->type == TASK_CLASSIFICATION) {
            label = label_index(g, cols[g->label]);
            if (label < 0) {
                bad_example(&bad, "line %d: label '%.64s' in column %d is not one of task's labels", line_no,
                            cols[g->label], g->label);
                continue;
            }
        } else if (g->label >= 0) {
            char *end;
            errno = 0;
            double v = strtod(cols[g->label], &end);
            if (!*cols[g->label] || *end || errno || !isfinite(v)) {
                bad_example(&bad, "line %d: score '%.64s' in column %d is not a finite number", line_no,
                            cols[g->label], g->label);
                continue;
            }
            /* STS-B scores are similarities in [0, 5]; any other target is bounded so that the
             * squared error stays finite in float. */
            double lo = g->task == GLUE_STSB ? 0 : -GLUE_MAX_TARGET, hi = g->task == GLUE_STSB ? 5 : GLUE_MAX_TARGET;
            if (v < lo || v > hi) {
                bad_example(&bad, "line %d: score '%.64s' in column %d is outside [%g, %g]", line_no,
                            cols[g->label], g->label, lo, hi);
                continue;
            }
            value = (float)v;
        }
        int len_a = tokenize(tok, cols[g->text_a], a, L), len_b = 0;
        if (g->text_b >= 0) {
            len_b = tokenize(tok, cols[g->text_b], b, L);
            truncate_pair(&len_a, &len_b, L - 3);
        } else {
            truncate_pair(&len_a, &len_b, L - 2);
        }
        textless += len_a + len_b == 0; /* empty, or only characters the tokenizer drops */
        int i = features_add(f, sp, a, len_a, g->text_b >= 0 ? b : NULL, len_b, row);
        f->labels[i] = label;
        f->values[i] = value;
    }
    bad_examples_summary(&bad);
    RP_CHECK(f->count > 0, "%s: no valid examples", path);
    RP_CHECK(textless < f->count, "%s: none of its %d examples has text (every text column is empty or yields no "
             "token): check task.glue_task or the task.text_*_column keys", path, f->count);
    if (textless)
        rp_log("%s: warning: %d of %d examples have no text (empty or no token): they are kept, as [CLS] [SEP]", path,
               textless, f->count);
    free(a);
    free(b);
    free(text);
    return rows;
}

void glue_write_predictions(const char *path, const GlueLayout *g, const TaskFeatures *f, const float *logits,
                            const int *pred_labels, const float *pred_values) {
    AtomicFile file; /* whole or not at all (core/io/atomic_file.h) */
    FILE *out = atomic_file_open_or_die(&file, path);
    int C = g->num_labels, classes = g->type == TASK_CLASSIFICATION;
    fprintf(out, "index\tprediction");
    for (int c = 0; classes && c < C; c++)
        fprintf(out, "\tprob_%s", g->label_names[c]);
    fputc('\n', out);
    for (int i = 0; i < f->count; i++) {
        if (!classes) {
            fprintf(out, "%d\t%.9g\n", f->example[i], (double)pred_values[i]); /* round-trips a float */
            continue;
        }
        /* p_c = exp(z_c - max z) / sum_c' exp(z_c' - max z), in double */
        const float *z = logits + (size_t)i * C;
        double top = z[0], sum = 0;
        for (int c = 1; c < C; c++)
            top = z[c] > top ? z[c] : top;
        for (int c = 0; c < C; c++)
            sum += exp(z[c] - top);
        fprintf(out, "%d\t%s", f->example[i], g->label_names[pred_labels[i]]);
        for (int c = 0; c < C; c++)
            fprintf(out, "\t%.9g", exp(z[c] - top) / sum);
        fputc('\n', out);
    }
    atomic_file_commit_or_die(&file);
}
