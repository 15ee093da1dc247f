/* Synthetic length-generalisation tasks in the tagging format (`realpos synth`, docs/synthetic.md).
 *
 * Every task is given to an encoder as one sequence of words: the input, then (DeepMind tasks:
 * Delétang et al. 2023, encoder variant of Ruoss et al. 2023) as many blank words SYNTH_BLANK as the
 * output has, the output read at the blanks. A word's label is its target; words that are not
 * scored (the input) carry SYNTH_IGNORED, which the tagging reader maps to "no label" (loss and
 * metrics skip it). With n the task's length:
 *   reverse          x_1..x_n over {0,1}, blanks n          output x_n..x_1
 *   duplicate        x_1..x_n over {0,1}, blanks 2n         output x_1..x_n x_1..x_n
 *   odds_first       x_1..x_n over {0,1}, blanks n          output x_1 x_3 x_5 .. x_2 x_4 ..
 *   sort             x_1..x_n over {0..4}, blanks n         output the x sorted ascending
 *   binary_addition  a + b, digits little-endian, |a| = ceil((n-1)/2), |b| = floor((n-1)/2)
 *                    (n >= 3), blanks |a| + 1               output (a + b) little-endian, |a| + 1 digits
 *   mqar             n pairs k_i v_i (n distinct keys of SYNTH_MQAR_KEYS, values of
 *                    SYNTH_MQAR_VALUES), then the n keys again in a random order; each query
 *                    word is labelled with its key's value (Zoology's multi-query recall)
 *   lookup           x_1..x_n over SYNTH_LOOKUP_SYMBOLS letters, no blanks: word i is labelled
 *                    x_{i-D} for i > D (the words i <= D are not scored), D = the distance
 *                    (n >= D + 1). The positive control for truncation: the label is a uniform
 *                    draw independent of every word but the one exactly D back, so a model does
 *                    better than 1/SYNTH_LOOKUP_SYMBOLS only where it can address offset D. */
#pragma once
#include <stdio.h>

#include "core/rng.h"

#define SYNTH_BLANK "?"   /* the word at an output position */
#define SYNTH_IGNORED "_" /* the label of an unscored word */
#define SYNTH_WORD 8      /* bytes of a word or label, NUL included */
#define SYNTH_MQAR_KEYS 256
#define SYNTH_MQAR_VALUES 64
#define SYNTH_LOOKUP_SYMBOLS 16 /* lookup's letters a..p */
#define SYNTH_DISTANCE_MAX 4096

typedef enum { SYNTH_REVERSE = 0, SYNTH_DUPLICATE, SYNTH_ODDS_FIRST, SYNTH_SORT, SYNTH_BINARY_ADDITION, SYNTH_MQAR,
               SYNTH_LOOKUP, SYNTH_NUM_TASKS } SynthTask;

/* One example: count words with their labels. */
typedef struct {
    int count, capacity;
    char (*word)[SYNTH_WORD];
    char (*label)[SYNTH_WORD];
} SynthExample;

/* The task named `name` (reverse, duplicate, odds_first, sort, binary_addition, mqar, lookup); -1 if none. */
int synth_task_find(const char *name);
const char *synth_task_name(SynthTask task);
/* 1 if the task takes a distance D (lookup: required, 1..SYNTH_DISTANCE_MAX), else 0 (it takes none). */
int synth_task_has_distance(SynthTask task);
/* Smallest length the task takes (binary_addition: 3, lookup: distance + 1, else 1). */
int synth_min_length(SynthTask task, int distance);
/* Words of an example of length n (its input and its blanks). */
int synth_words(SynthTask task, int n);
/* Draw one example of length n from rng into ex (grown as needed); distance: lookup's D, else 0. */
void synth_generate(SynthTask task, int n, int distance, Rng *rng, SynthExample *ex);
void synth_example_free(SynthExample *ex);
/* "word label" lines, then a blank line. */
void synth_write(FILE *out, const SynthExample *ex);
