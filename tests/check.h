/* Minimal test harness: CHECK prints one PASS/FAIL line per assertion; tests/run.sh counts them. */
#pragma once
#include <stdio.h>

typedef struct {
    int passed, failed;
} TestTally;

#define CHECK(tally, cond, ...)                                                                    \
    do {                                                                                           \
        int check_ok_ = (cond);                                                                    \
        printf("%s ", check_ok_ ? "PASS" : "FAIL");                                                \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
        if (check_ok_)                                                                             \
            (tally)->passed++;                                                                     \
        else                                                                                       \
            (tally)->failed++;                                                                     \
    } while (0)

/* Exit status for main(): non-zero if anything failed. */
static inline int tally_exit(const TestTally *t) {
    printf("%d passed, %d failed\n", t->passed, t->failed);
    return t->failed ? 1 : 0;
}
