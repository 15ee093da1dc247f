/* Error-exit recovery and allocation tracking for the fuzz harnesses (see fuzz.h). Linked with
 * -Wl,--wrap=exit,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign:
 * the library's calls to these land in the __wrap_ functions below. */
#include "tests/fuzz/fuzz.h"

#include <cjson/cJSON.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t alignment, size_t size);
_Noreturn void __real_exit(int status);

jmp_buf fuzz_jump;

/* Open-addressing set of the blocks allocated while tracking (TOMBSTONE marks a freed slot). */
#define TOMBSTONE ((void *)1)
typedef struct {
    void **slots;
    size_t capacity, used, live; /* used counts live blocks and tombstones */
    int tracking;
    pthread_mutex_t lock;
} Tracker;

static Tracker tracker = {.lock = PTHREAD_MUTEX_INITIALIZER};
static FILE *report_stream; /* stderr before FUZZ_QUIET */

void fuzz_fail(const char *fmt, ...) {
    FILE *out = report_stream ? report_stream : stderr;
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", out);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
    fflush(out);
    abort();
}

static size_t slot_of(const void *p, size_t capacity) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (capacity - 1);
}

static void set_insert(void *p);

static void set_grow(void) {
    void **old = tracker.slots;
    size_t old_capacity = tracker.capacity;
    tracker.capacity = old_capacity ? 2 * old_capacity : 1024;
    while (tracker.live * 2 >= tracker.capacity)
        tracker.capacity *= 2;
    tracker.slots = __real_calloc(tracker.capacity, sizeof *tracker.slots);
    if (!tracker.slots)
        abort();
    tracker.used = tracker.live = 0;
    for (size_t i = 0; i < old_capacity; i++)
        if (old[i] && old[i] != TOMBSTONE)
            set_insert(old[i]);
    __real_free(old);
}

static void set_insert(void *p) {
    if ((tracker.used + 1) * 2 > tracker.capacity)
        set_grow();
    size_t i = slot_of(p, tracker.capacity);
    while (tracker.slots[i] && tracker.slots[i] != TOMBSTONE)
        i = (i + 1) & (tracker.capacity - 1);
    tracker.used += !tracker.slots[i];
    tracker.slots[i] = p;
    tracker.live++;
}

/* Remove p if tracked; returns whether it was. */
static int set_remove(const void *p) {
    if (!tracker.capacity)
        return 0;
    for (size_t i = slot_of(p, tracker.capacity); tracker.slots[i];
         i = (i + 1) & (tracker.capacity - 1))
        if (tracker.slots[i] == p) {
            tracker.slots[i] = TOMBSTONE;
            tracker.live--;
            return 1;
        }
    return 0;
}

static void *track(void *p) {
    if (p) {
        pthread_mutex_lock(&tracker.lock);
        if (tracker.tracking)
            set_insert(p);
        pthread_mutex_unlock(&tracker.lock);
    }
    return p;
}

static void untrack(const void *p) {
    if (!p)
        return;
    pthread_mutex_lock(&tracker.lock);
    set_remove(p);
    pthread_mutex_unlock(&tracker.lock);
}

void *__wrap_malloc(size_t size) { return track(__real_malloc(size)); }
void *__wrap_calloc(size_t count, size_t size) { return track(__real_calloc(count, size)); }
void __wrap_free(void *p) {
    untrack(p);
    __real_free(p);
}
void *__wrap_realloc(void *p, size_t size) {
    void *q = __real_realloc(p, size);
    if (q || !size) { /* on failure p stays valid (and tracked) */
        untrack(p);
        track(q);
    }
    return q;
}
int __wrap_posix_memalign(void **p, size_t alignment, size_t size) {
    int rc = __real_posix_memalign(p, alignment, size);
    if (!rc)
        track(*p);
    return rc;
}

_Noreturn void __wrap_exit(int status) {
    if (!tracker.tracking)
        __real_exit(status);
    if (omp_in_parallel())
        fuzz_fail("exit(%d) called inside an OpenMP parallel region", status);
    longjmp(fuzz_jump, 1);
}

void fuzz_begin(void) {
    pthread_mutex_lock(&tracker.lock);
    tracker.tracking = 1;
    pthread_mutex_unlock(&tracker.lock);
}

/* Stop tracking; free (or count) what is left. */
static size_t stop_tracking(int release) {
    pthread_mutex_lock(&tracker.lock);
    tracker.tracking = 0;
    size_t left = tracker.live;
    for (size_t i = 0; i < tracker.capacity; i++) {
        if (release && tracker.slots[i] && tracker.slots[i] != TOMBSTONE)
            __real_free(tracker.slots[i]);
        tracker.slots[i] = NULL;
    }
    tracker.used = tracker.live = 0;
    pthread_mutex_unlock(&tracker.lock);
    return left;
}

void fuzz_end(void) {
    size_t left = stop_tracking(0);
    FUZZ_REQUIRE(!left, "%zu block(s) allocated by the library were not freed on a normal return (a leak)", left);
}

void fuzz_recover(void) { stop_tracking(1); }

void fuzz_setup(void) {
    static int done = 0;
    if (done)
        return;
    done = 1;
    omp_set_num_threads(1);
    cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = __wrap_malloc, .free_fn = __wrap_free});
    report_stream = stderr;
    if (env_switch("FUZZ_QUIET", 0)) {
        FILE *null = fopen("/dev/null", "w");
        if (null)
            stderr = null; /* the library's messages; sanitizer reports write to fd 2 directly */
    }
}

static char scratch_path[256];
static void remove_scratch(void) { unlink(scratch_path); }

const char *fuzz_write_file(const uint8_t *data, size_t size, const char *suffix) {
    if (!scratch_path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(scratch_path, sizeof scratch_path, "%s/realpos-fuzz-%ld%s", dir && *dir ? dir : "/tmp",
                 (long)getpid(), suffix);
        atexit(remove_scratch);
    }
    FILE *f = fopen(scratch_path, "wb");
    FUZZ_REQUIRE(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", scratch_path);
    return scratch_path;
}
