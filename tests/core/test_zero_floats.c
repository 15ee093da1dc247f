/* zero_floats (core/common.h): clears exactly x[0, count) for any thread count, counts that do
 * not split evenly and count 0, and leaves the floats around it alone. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/common.h"
#include "tests/check.h"

enum { GUARD = 16 };

/* Fill [-GUARD, count + GUARD) with 1, clear [0, count) with `threads` threads, and check it. */
static void check_count(TestTally *t, size_t count, int threads) {
    float *block = xalloc_floats(count + 2 * GUARD), *x = block + GUARD;
    for (size_t e = 0; e < count + 2 * GUARD; e++)
        block[e] = 1.0f;
    omp_set_num_threads(threads);
    zero_floats(x, count);
    size_t cleared = 0, guards_intact = 0;
    for (size_t e = 0; e < count; e++)
        cleared += x[e] == 0.0f;
    for (size_t e = 0; e < GUARD; e++)
        guards_intact += (block[e] == 1.0f) + (x[count + e] == 1.0f);
    CHECK(t, cleared == count && guards_intact == 2 * GUARD,
          "zero_floats(%zu floats, %d threads): %zu of %zu cleared, %zu of %d guard floats intact", count,
          threads, cleared, count, guards_intact, 2 * GUARD);
    free(block);
}

int main(void) {
    TestTally t = {0, 0};
    const size_t counts[] = {0, 1, 2, 3, 7, 1001, 1 << 20};
    for (int threads = 1; threads <= 3; threads++)
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            check_count(&t, counts[i], threads);
    return tally_exit(&t);
}
