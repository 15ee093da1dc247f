/* Pre-tokenized fine-tuning sequences and batch filling (task_data.h). */
#include "train/tasks/task_data.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/common.h"
#include "layers/layers.h"

enum { BAD_EXAMPLES_SHOWN = 10 };

void features_init(TaskFeatures *f, int L) {
    memset(f, 0, sizeof *f);
    f->L = L;
}

void features_free(TaskFeatures *f) {
    free(f->input_ids);
    free(f->lengths);
    free(f->type_starts);
    free(f->labels);
    free(f->values);
    free(f->start);
    free(f->end);
    free(f->example);
    free(f->token_labels);
    memset(f, 0, sizeof *f);
}

static void *grow(void *p, size_t count, size_t size) {
    void *q = realloc(p, count * size);
    RP_CHECK(q, "out of memory holding the fine-tuning sequences");
    return q;
}

int features_add(TaskFeatures *f, SpecialTokens sp, const int *a, int len_a, const int *b, int len_b, int example) {
    int L = f->L, n = 1 + len_a + 1 + (b ? len_b + 1 : 0);
    RP_CHECK(n <= L, "internal: a sequence of %d tokens does not fit max_seq_len %d", n, L);
    if (f->count == f->capacity) {
        f->capacity = f->capacity ? 2 * f->capacity : 1024;
        size_t c = (size_t)f->capacity;
        f->input_ids = grow(f->input_ids, c * (size_t)L, sizeof(int));
        f->lengths = grow(f->lengths, c, sizeof(int));
        f->type_starts = grow(f->type_starts, c, sizeof(int));
        f->labels = grow(f->labels, c, sizeof(int));
        f->values = grow(f->values, c, sizeof(float));
        f->start = grow(f->start, c, sizeof(int));
        f->end = grow(f->end, c, sizeof(int));
        f->example = grow(f->example, c, sizeof(int));
        if (f->per_token)
            f->token_labels = grow(f->token_labels, c * (size_t)L, sizeof(int));
    }
    int i = f->count++;
    int *ids = f->input_ids + (size_t)i * L, pos = 0;
    ids[pos++] = sp.cls;
    memcpy(ids + pos, a, sizeof(int) * (size_t)len_a);
    pos += len_a;
    ids[pos++] = sp.sep;
    f->type_starts[i] = pos;
    if (b) {
        memcpy(ids + pos, b, sizeof(int) * (size_t)len_b);
        pos += len_b;
        ids[pos++] = sp.sep;
    }
    for (int l = pos; l < L; l++)
        ids[l] = sp.pad;
    f->lengths[i] = pos;
    f->labels[i] = -1;
    f->values[i] = NAN;
    f->start[i] = f->end[i] = 0;
    f->example[i] = example;
    for (int l = 0; f->per_token && l < L; l++)
        f->token_labels[(size_t)i * L + l] = IGNORE_LABEL;
    return i;
}

int features_batch_length(const TaskFeatures *f, const int *rows, int B, int longest) {
    if (!longest)
        return f->L;
    int L = 2;
    for (int b = 0; b < B; b++)
        if (rows[b] >= 0 && f->lengths[rows[b]] > L)
            L = f->lengths[rows[b]];
    L = (L + TASK_PAD_MULTIPLE - 1) / TASK_PAD_MULTIPLE * TASK_PAD_MULTIPLE;
    return L < f->L ? L : f->L;
}

void features_fill_batch(const TaskFeatures *f, SpecialTokens sp, const int *rows, int B, int L, int *input_ids,
                         int *token_type_ids, int *attention_mask) {
    RP_CHECK(L >= 2 && L <= f->L, "internal: batch length %d outside [2, %d]", L, f->L);
    for (int b = 0; b < B; b++) {
        int *ids = input_ids + (size_t)b * L, *types = token_type_ids + (size_t)b * L,
            *mask = attention_mask + (size_t)b * L;
        int r = rows[b], length = 2, type_start = 2;
        if (r >= 0) {
            length = f->lengths[r];
            type_start = f->type_starts[r];
            RP_CHECK(length <= L, "internal: sequence %d of %d tokens in a batch of length %d", r, length, L);
            memcpy(ids, f->input_ids + (size_t)r * f->L, sizeof(int) * (size_t)L); /* padded in f */
        } else {
            ids[0] = sp.cls;
            ids[1] = sp.sep;
            for (int l = 2; l < L; l++)
                ids[l] = sp.pad;
        }
        for (int l = 0; l < L; l++) {
            types[l] = l >= type_start && l < length;
            mask[l] = l < length;
        }
    }
}

void truncate_pair(int *len_a, int *len_b, int max_total) {
    while (*len_a + *len_b > max_total) {
        if (*len_a > *len_b)
            (*len_a)--;
        else
            (*len_b)--;
    }
}

void bad_example(BadExamples *bad, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    RP_CHECK(bad->policy != BAD_FATAL, "%s: %s (task.bad_examples = fatal)", bad->path, message);
    if (bad->count++ < BAD_EXAMPLES_SHOWN)
        rp_log("%s: %s; skipped", bad->path, message);
}

void bad_examples_summary(const BadExamples *bad) {
    if (bad->count)
        rp_log("%s: %d malformed example%s skipped (task.bad_examples = skip)%s", bad->path, bad->count,
               bad->count == 1 ? "" : "s", bad->count > BAD_EXAMPLES_SHOWN ? "; the first 10 are shown above" : "");
}
