/* The synthetic task generators (train/tasks/synth.c): each output against the task's definition
 * recomputed here from the drawn input, word counts, the ignored labels on the input, and
 * determinism for a seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/tasks/synth.h"
#include "tests/check.h"

/* The example's words as one string "w/l w/l ..." for exact comparisons. */
static void render(const SynthExample *ex, char *out, size_t size) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < ex->count && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s/%s", i ? " " : "", ex->word[i], ex->label[i]);
}

/* Input digits (the words before the first blank) and output digits (the blanks' labels). */
static int split(const SynthExample *ex, int *x, int *y, int *m) {
    int n = 0, ok = 1;
    *m = 0;
    for (int i = 0; i < ex->count; i++) {
        if (!strcmp(ex->word[i], SYNTH_BLANK))
            y[(*m)++] = atoi(ex->label[i]);
        else {
            ok &= !strcmp(ex->label[i], SYNTH_IGNORED) && *m == 0;
            if (strcmp(ex->word[i], "+"))
                x[n++] = atoi(ex->word[i]);
        }
    }
    return ok ? n : -1;
}

int main(void) {
    TestTally t = {0, 0};
    SynthExample ex = {0};
    Rng rng;
    int x[512], y[512], m;
    char text[8192];
    for (int task = 0; task < SYNTH_NUM_TASKS; task++) {
        int good_count = 1, good_output = 1, distance = synth_task_has_distance(task) ? 5 : 0;
        rng_seed(&rng, 7);
        for (int n = synth_min_length(task, distance); n <= 30; n++) {
            synth_generate(task, n, distance, &rng, &ex);
            good_count &= ex.count == synth_words(task, n);
            if (task == SYNTH_LOOKUP) { /* word i labelled word i - D from i = D on, single letters */
                for (int i = 0; i < ex.count; i++)
                    good_output &= strlen(ex.word[i]) == 1 && ex.word[i][0] >= 'a' &&
                                   ex.word[i][0] < 'a' + SYNTH_LOOKUP_SYMBOLS &&
                                   !strcmp(ex.label[i], i < distance ? SYNTH_IGNORED : ex.word[i - distance]);
                continue;
            }
            if (task == SYNTH_MQAR) { /* each query's label is the value after its key's first mention */
                for (int q = 2 * n; q < 3 * n; q++) {
                    int found = 0;
                    for (int p = 0; p < 2 * n; p += 2)
                        if (!strcmp(ex.word[p], ex.word[q]))
                            found += !strcmp(ex.word[p + 1], ex.label[q]);
                    good_output &= found == 1 && !strcmp(ex.label[2 * (q - 2 * n)], SYNTH_IGNORED);
                }
                continue;
            }
            int len = split(&ex, x, y, &m), want[512], w = 0;
            good_output &= len >= 0;
            if (len < 0)
                continue;
            if (task == SYNTH_REVERSE)
                for (int i = 0; i < n; i++)
                    want[w++] = x[n - 1 - i];
            else if (task == SYNTH_DUPLICATE)
                for (int r = 0; r < 2; r++)
                    for (int i = 0; i < n; i++)
                        want[w++] = x[i];
            else if (task == SYNTH_ODDS_FIRST) {
                for (int i = 0; i < n; i += 2)
                    want[w++] = x[i];
                for (int i = 1; i < n; i += 2)
                    want[w++] = x[i];
            } else if (task == SYNTH_SORT) {
                memcpy(want, x, sizeof(int) * (size_t)n);
                for (int i = 1; i < n; i++) /* insertion sort */
                    for (int j = i; j > 0 && want[j - 1] > want[j]; j--) {
                        int s = want[j];
                        want[j] = want[j - 1];
                        want[j - 1] = s;
                    }
                w = n;
            } else { /* binary addition: the little-endian digits as numbers */
                int la = n / 2, lb = (n - 1) / 2;
                unsigned long long a = 0, b = 0, sum = 0;
                for (int i = la - 1; i >= 0; i--)
                    a = 2 * a + (unsigned long long)x[i];
                for (int i = lb - 1; i >= 0; i--)
                    b = 2 * b + (unsigned long long)x[la + i];
                for (int i = m - 1; i >= 0; i--)
                    sum = 2 * sum + (unsigned long long)y[i];
                good_output &= len == la + lb && m == la + 1 && sum == a + b;
                continue;
            }
            good_output &= m == w && !memcmp(want, y, sizeof(int) * (size_t)w);
        }
        CHECK(&t, good_count, "%s: words per example as synth_words says, lengths up to 30",
              synth_task_name(task));
        CHECK(&t, good_output, "%s: outputs as the task defines them, input words labelled '%s'",
              synth_task_name(task), SYNTH_IGNORED);
    }
    /* known small examples, drawn with seed 1 */
    rng_seed(&rng, 1);
    synth_generate(SYNTH_REVERSE, 3, 0, &rng, &ex);
    int a = atoi(ex.word[0]), b = atoi(ex.word[1]), c = atoi(ex.word[2]);
    char want[256];
    snprintf(want, sizeof want, "%d/_ %d/_ %d/_ ?/%d ?/%d ?/%d", a, b, c, c, b, a);
    render(&ex, text, sizeof text);
    CHECK(&t, !strcmp(text, want), "reverse of length 3: '%s' (expected '%s')", text, want);
    SynthExample fixed = {0};
    rng_seed(&rng, 3);
    int found = 0;
    for (int i = 0; i < 200 && !found; i++) { /* find a draw of a = 11 (3), b = 1 and check 100 (4) */
        synth_generate(SYNTH_BINARY_ADDITION, 4, 0, &rng, &fixed);
        render(&fixed, text, sizeof text);
        found = !strcmp(text, "1/_ 1/_ +/_ 1/_ ?/0 ?/0 ?/1");
    }
    CHECK(&t, found, "binary_addition of length 4 draws 11 + 1 = 001 (little-endian 3 + 1 = 4)");
    rng_seed(&rng, 5);
    synth_generate(SYNTH_SORT, 4, 0, &rng, &fixed);
    render(&fixed, text, sizeof text);
    CHECK(&t, strlen(text) > 0 && fixed.count == 8 && !strcmp(fixed.word[4], "?"), "sort of length 4: %s", text);
    synth_generate(SYNTH_MQAR, 2, 0, &rng, &fixed);
    render(&fixed, text, sizeof text);
    CHECK(&t, fixed.count == 6 && fixed.word[0][0] == 'k' && fixed.word[1][0] == 'v' && fixed.label[4][0] == 'v',
          "mqar of 2 pairs: %s", text);
    /* determinism */
    char first[8192];
    rng_seed(&rng, 11);
    synth_generate(SYNTH_MQAR, 20, 0, &rng, &ex);
    render(&ex, first, sizeof first);
    rng_seed(&rng, 11);
    synth_generate(SYNTH_MQAR, 20, 0, &rng, &ex);
    render(&ex, text, sizeof text);
    CHECK(&t, !strcmp(first, text), "the same seed draws the same example");
    rng_seed(&rng, 12);
    synth_generate(SYNTH_MQAR, 20, 0, &rng, &ex);
    render(&ex, text, sizeof text);
    CHECK(&t, strcmp(first, text) != 0, "another seed draws another example");
    /* lookup: the labels are the words D back, uniform over the letters (each letter's share of
     * 20000 draws within 5 standard deviations of 1/16) */
    long letters[SYNTH_LOOKUP_SYMBOLS] = {0}, drawn = 0;
    rng_seed(&rng, 13);
    for (int i = 0; i < 500; i++) {
        synth_generate(SYNTH_LOOKUP, 48, 8, &rng, &ex);
        for (int w = 8; w < ex.count; w++, drawn++)
            letters[ex.label[w][0] - 'a']++;
    }
    int uniform = 1;
    double share = 1.0 / SYNTH_LOOKUP_SYMBOLS, sd = sqrt(share * (1 - share) / (double)drawn);
    for (int c = 0; c < SYNTH_LOOKUP_SYMBOLS; c++)
        uniform &= fabs((double)letters[c] / (double)drawn - share) < 5 * sd;
    CHECK(&t, uniform && drawn == 500 * 40, "lookup at D = 8: %ld labels, every letter near 1/16", drawn);
    synth_example_free(&ex);
    synth_example_free(&fixed);
    return tally_exit(&t);
}
