/* LD_PRELOAD shim for scripts/dev/region_counts.sh: counts the GOMP_parallel calls (each `#pragma omp
 * parallel` of the library) by return address, and those made at nesting level > 0 (a region inside
 * another: a team of one and a futex wake at its end). Writes "object offset calls nested" lines to
 * $REGION_COUNTS_OUT at exit. A development tool, not part of realpos. */
#include <dlfcn.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { SLOTS = 4096 };
static _Atomic uintptr_t callers[SLOTS];
static _Atomic unsigned long long calls[SLOTS], nested[SLOTS];

typedef void (*GompParallel)(void (*)(void *), void *, unsigned, unsigned);

void GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
void GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags) {
    static _Atomic(GompParallel) real;
    GompParallel next = atomic_load(&real);
    if (!next) {
        *(void **)&next = dlsym(RTLD_NEXT, "GOMP_parallel");
        atomic_store(&real, next);
    }
    const uintptr_t at = (uintptr_t)__builtin_return_address(0);
    size_t slot = (at >> 2) % SLOTS;
    for (int probe = 0; probe < SLOTS; probe++, slot = (slot + 1) % SLOTS) {
        uintptr_t held = atomic_load(&callers[slot]);
        if (held == at || (held == 0 && (atomic_compare_exchange_strong(&callers[slot], &held, at) || held == at)))
            break;
    }
    atomic_fetch_add(&calls[slot], 1);
    if (omp_get_level() > 0)
        atomic_fetch_add(&nested[slot], 1);
    next(fn, data, threads, flags);
}

__attribute__((destructor)) static void write_counts(void) {
    const char *path = getenv("REGION_COUNTS_OUT");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f)
        return;
    for (int s = 0; s < SLOTS; s++) {
        const uintptr_t at = atomic_load(&callers[s]);
        Dl_info info = {0};
        if (at && dladdr((void *)at, &info) && info.dli_fname)
            fprintf(f, "%s %#lx %llu %llu\n", info.dli_fname, (unsigned long)(at - (uintptr_t)info.dli_fbase),
                    (unsigned long long)calls[s], (unsigned long long)nested[s]);
    }
    fclose(f);
}
