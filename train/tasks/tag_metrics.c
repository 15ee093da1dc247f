/* Tagging metrics (tag_metrics.h). */
#include "train/tasks/tag_metrics.h"

#include <string.h>

#include "core/common.h"

/* 'B', 'I' or 'O' of a label index (-1: O) and its type: the text after "B-"/"I-" compared by
 * content, so B-PER and I-PER share a type. */
static char tag_of(const TagLabels *ls, int label) { return label < 0 ? 'O' : ls->names[label][0]; }
static const char *type_of(const TagLabels *ls, int label) { return label < 0 ? "" : ls->names[label] + 2; }

int tag_chunks(const TagLabels *ls, const int *labels, int n, int *out) {
    int count = 0, start = 0;
    char prev_tag = 'O';
    int prev_label = -1;
    for (int i = 0; i <= n; i++) { /* position n: the O that closes the sequence */
        int label = i < n ? labels[i] : -1;
        if (label >= 0 && tag_of(ls, label) == 'O')
            label = -1;
        char tag = tag_of(ls, label);
        int same_type = prev_label >= 0 && label >= 0 && !strcmp(type_of(ls, prev_label), type_of(ls, label));
        int ends = prev_tag != 'O' && (tag != 'I' || !same_type);
        int starts = tag == 'B' || (tag == 'I' && (prev_tag == 'O' || !same_type));
        if (ends) {
            out[3 * count] = prev_label;
            out[3 * count + 1] = start;
            out[3 * count + 2] = i - 1;
            count++;
        }
        if (starts)
            start = i;
        prev_tag = tag;
        prev_label = label;
    }
    return count;
}

void tag_scores_init(TagScores *s) { memset(s, 0, sizeof *s); }

void tag_scores_free(TagScores *s) {
    free(s->by_length);
    memset(s, 0, sizeof *s);
}

static void add_accuracy(TagAccuracy *a, long words, long right, int scored) {
    a->words += words;
    a->words_right += right;
    a->sequences += scored;
    a->sequences_right += scored && right == words;
}

/* Two chunks are the same entity when their types' names and spans agree. */
static int same_chunk(const TagLabels *ls, const int *a, const int *b) {
    return a[1] == b[1] && a[2] == b[2] && !strcmp(type_of(ls, a[0]), type_of(ls, b[0]));
}

void tag_scores_add(TagScores *s, const TagLabels *ls, const int *gold, const int *pred, int n, int in_range) {
    long words = 0, right = 0;
    for (int i = 0; i < n; i++)
        if (gold[i] >= 0) {
            words++;
            right += pred[i] == gold[i];
        }
    int scored = words > 0;
    add_accuracy(&s->all, words, right, scored);
    add_accuracy(in_range ? &s->in_range : &s->beyond, words, right, scored);
    if (!s->by_length || n > s->max_length) { /* grow the per-length table to n */
        int old = s->by_length ? s->max_length + 1 : 0;
        s->by_length = realloc(s->by_length, sizeof(TagAccuracy) * (size_t)(n + 1));
        RP_CHECK(s->by_length, "out of memory scoring");
        memset(s->by_length + old, 0, sizeof(TagAccuracy) * (size_t)(n + 1 - old));
        s->max_length = n;
    }
    add_accuracy(&s->by_length[n], words, right, scored);
    if (!ls->bio)
        return;
    int *g = xmalloc(sizeof(int) * (size_t)n + 1), *p = xmalloc(sizeof(int) * (size_t)n + 1);
    int *gc = xmalloc(sizeof(int) * 3 * ((size_t)n + 1)), *pc = xmalloc(sizeof(int) * 3 * ((size_t)n + 1));
    for (int i = 0; i < n; i++) { /* words without a gold label are O in both */
        g[i] = gold[i];
        p[i] = gold[i] >= 0 ? pred[i] : -1;
    }
    int ng = tag_chunks(ls, g, n, gc), np = tag_chunks(ls, p, n, pc);
    s->entities_gold += ng;
    s->entities_predicted += np;
    for (int a = 0; a < ng; a++)
        for (int b = 0; b < np; b++)
            if (same_chunk(ls, gc + 3 * a, pc + 3 * b)) {
                s->entities_right++;
                break;
            }
    free(g);
    free(p);
    free(gc);
    free(pc);
}

double tag_ratio(long num, long den) { return den ? (double)num / (double)den : 0.0; }

double tag_f1(const TagScores *s) {
    double p = tag_ratio(s->entities_right, s->entities_predicted), r = tag_ratio(s->entities_right, s->entities_gold);
    return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}
