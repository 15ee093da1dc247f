/* Tagging metrics (task.type = tagging), over the words that carry a gold label:
 *   token accuracy     right words / labelled words
 *   sequence accuracy  sequences with every labelled word right / sequences with a labelled word
 *   entities (BIO / IOB2 label sets): precision, recall and F1 of exact (type, start, end) chunks,
 *     micro-averaged, as seqeval computes them by default (conlleval chunking): a chunk starts at
 *     B-X, or at I-X after O, after the end of the sequence or after a tag of another type; it
 *     goes on over I-X; anything else ends it. Words without a gold label count as O in both.
 * Both accuracies are also kept per example length in words. */
#pragma once
#include "train/tasks/conll.h"

typedef struct {
    long words, words_right, sequences, sequences_right;
} TagAccuracy;

typedef struct {
    TagAccuracy all, in_range, beyond;
    long entities_gold, entities_predicted, entities_right;
    int max_length;          /* longest example seen, words */
    TagAccuracy *by_length;  /* [max_length + 1] */
} TagScores;

/* Chunks (type = label index of its B-/I- tag's type, start, end inclusive) of one sequence of label
 * indices (-1 = O), as seqeval's get_entities; returns their number, written to out[3 * k ...]
 * (capacity n chunks). */
int tag_chunks(const TagLabels *ls, const int *labels, int n, int *out);

void tag_scores_init(TagScores *s);
/* Score one example: gold[n] (-1: no gold label, not scored), pred[n] (-1: no prediction, wrong);
 * in_range: its length is within the training lengths. */
void tag_scores_add(TagScores *s, const TagLabels *ls, const int *gold, const int *pred, int n, int in_range);
void tag_scores_free(TagScores *s);
/* Ratios (0 when the denominator is 0, as seqeval's zero_division default). */
double tag_ratio(long num, long den);
double tag_f1(const TagScores *s);
