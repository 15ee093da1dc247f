/* Support for the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * realpos reports every bad input with RP_FATAL, which calls exit(1). A harness must survive that
 * and go on with the next input, without leaking what the loader had allocated. The harnesses are
 * linked with -Wl,--wrap=exit (and --wrap of the allocation functions, see support.c), so
 * that, inside FUZZ_GUARD:
 *   - exit() from the library jumps back to the guard instead of ending the process (on the
 *     calling thread only: an exit inside an OpenMP parallel region aborts, a bug of its own);
 *   - every block the library allocates (malloc, calloc, realloc, posix_memalign, and cJSON's
 *     nodes) is tracked; after an error exit the tracked blocks are freed, and after a normal
 *     return any block still tracked is a leak, reported by abort().
 * Usage in LLVMFuzzerTestOneInput:
 *     fuzz_begin();
 *     if (setjmp(fuzz_jump) == 0) { ...the calls that may fail...; fuzz_end(); }
 *     else fuzz_recover();   (an error exit landed here)
 * Nothing here is used by realpos itself. */
#pragma once
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

extern jmp_buf fuzz_jump;
/* Start tracking; exit() now longjmps to fuzz_jump with value 1. */
void fuzz_begin(void);
/* After a normal return: stop tracking; abort if a tracked block was not freed. */
void fuzz_end(void);
/* After an error exit: free every tracked block, stop tracking. */
void fuzz_recover(void);

/* Once per process: one OpenMP thread, cJSON's allocations tracked, and (FUZZ_QUIET on in the
 * environment) the library's messages on stderr discarded. */
void fuzz_setup(void);

/* A harness's own check failed: the message on the real stderr (even under FUZZ_QUIET), abort. */
_Noreturn void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define FUZZ_REQUIRE(cond, ...) ((cond) ? (void)0 : fuzz_fail(__VA_ARGS__))

/* Write data to a per-process scratch file and return its path (for loaders that read files). */
const char *fuzz_write_file(const uint8_t *data, size_t size, const char *suffix);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
