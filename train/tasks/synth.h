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
 *                    word is labelled with its key's value (Zoology's multi-query recall) */
#pragma once
#include <stdio.h>

#include "core/rng.h"

#define SYNTH_BLANK "?"   /* the word at an output position */
#define SYNTH_IGNORED "_" /* the label of an unscored word */
#define SYNTH_WORD 8      /* bytes of a word or label, NUL included */
#define SYNTH_MQAR_KEYS 256
#define SYNTH_MQAR_VALUES 64

typedef enum { SYNTH_REVERSE = 0, SYNTH_DUPLICATE, SYNTH_ODDS_FIRST, SYNTH_SORT, SYNTH_BINARY_ADDITION, SYNTH_MQAR,
               SYNTH_NUM_TASKS } SynthTask;

/* One example: count words with their labels. */
typedef struct {
    int count, capacity;
    char (*word)[SYNTH_WORD];
    char (*label)[SYNTH_WORD];
} SynthExample;

/* The task named `name` (reverse, duplicate, odds_first, sort, binary_addition, mqar); -1 if none. */
int synth_task_find(const char *name);
const char *synth_task_name(SynthTask task);
/* Smallest length the task takes (binary_addition: 3, else 1). */
int synth_min_length(SynthTask task);
/* Words of an example of length n (its input and its blanks). */
int synth_words(SynthTask task, int n);
/* Draw one example of length n from rng into ex (grown as needed). */
void synth_generate(SynthTask task, int n, Rng *rng, SynthExample *ex);
void synth_example_free(SynthExample *ex);
/* "word label" lines, then a blank line. */
void synth_write(FILE *out, const SynthExample *ex);
