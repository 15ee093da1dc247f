/* Pre-tokenized fine-tuning sequences: every example is turned into padded token ids once at
 * start-up; a batch is then a copy of rows. Layout of a sequence of length n <= L:
 *   [CLS] a... [SEP] (b... [SEP])  [PAD]...      token type 1 from type_start to n, else 0. */
#pragma once
#include <stddef.h>

#include "train/config/config.h"
#include "train/data/tokenizer.h"

typedef struct {
    int count, capacity, L;
    int *input_ids;   /* [count, L] */
    int *lengths;     /* [count] tokens before padding */
    int *type_starts; /* [count] first position of segment B (= length for a single text) */
    int *labels;      /* [count] classification label index, -1 = unlabelled */
    float *values;    /* [count] regression target (NaN = unlabelled) */
    int *start, *end; /* [count] SQuAD answer token positions (0 = [CLS]: not in this window) */
    int *example;     /* [count] index of the example (row or question) the sequence comes from */
    int per_token;     /* tagging: token_labels are kept */
    int *token_labels; /* [count, L] tagging: label index per position, IGNORE_LABEL where none */
} TaskFeatures;

void features_init(TaskFeatures *f, int L);
void features_free(TaskFeatures *f);
/* Append one sequence [CLS] a [SEP] (b [SEP]); returns its index. a + b must fit L - 2 or L - 3. */
int features_add(TaskFeatures *f, SpecialTokens sp, const int *a, int len_a, const int *b, int len_b, int example);

/* Batches are padded to their longest sequence rounded up to a multiple of this (at most f->L).
 * 1: the CPU kernels take any length (BLAS and the vector loops handle remainders), while rounding
 * up to 8 would add 3.5 tokens per sequence on average, a quarter of SST-2's 13 with
 * task.group_by_length. A GPU-style multiple (8, 64) would go here. */
#define TASK_PAD_MULTIPLE 1

/* Padded length of a batch of sequences rows[0..B) (< 0: a padding sequence of 2 tokens): with
 * longest = 1 its longest sequence rounded up to TASK_PAD_MULTIPLE and capped at f->L, else f->L. */
int features_batch_length(const TaskFeatures *f, const int *rows, int B, int longest);
/* Fill batch arrays [B, L] (row stride L, L <= f->L and >= every row's length) from sequences
 * rows[0..B); a row index < 0 is a padding sequence ([CLS] [SEP] only). */
void features_fill_batch(const TaskFeatures *f, SpecialTokens sp, const int *rows, int B, int L, int *input_ids,
                         int *token_type_ids, int *attention_mask);

/* google-research/bert's _truncate_seq_pair: drop the last token of the longer text (of b on a
 * tie) until len_a + len_b <= max_total. */
void truncate_pair(int *len_a, int *len_b, int max_total);

/* Bad-example reporting shared by the readers: the first few are printed in full, then only
 * counted; with BAD_FATAL the first one stops the program. */
typedef struct {
    BadExamplePolicy policy;
    const char *path;
    int count;
} BadExamples;
void bad_example(BadExamples *bad, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Log "PATH: N malformed examples skipped" if any. */
void bad_examples_summary(const BadExamples *bad);
