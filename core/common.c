#define _POSIX_C_SOURCE 200809L
#include "core/common.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* The process-wide hooks (common.h: set once when a job starts, reset when it ends). */
static JobHooks job_hooks;

void rp_install_job_hooks(JobHooks hooks) { job_hooks = hooks; }

int rp_log_quiet(void) { return job_hooks.quiet_log; }

_Noreturn void rp_fatal_exit(void) {
    fflush(stdout);
    fflush(stderr);
    if (job_hooks.abort_job)
        job_hooks.abort_job();
    exit(1);
}

void rp_log(const char *fmt, ...) {
    if (job_hooks.quiet_log)
        return;
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
    fprintf(stderr, "[%s] ", stamp);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    RP_CHECK(p, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    RP_CHECK(p, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

float *xalloc_floats(size_t count) { return xalloc_floats_for(count, "a float block"); }

/* Blocks of 2 MiB or more (a run's parameters, gradients, moments, activations, bf16 copies and
 * oneDNN's scratchpads, laid out once) start on a 2 MiB boundary, rounded up to whole 2 MiB, and
 * are offered to the kernel's transparent huge pages (MADV_HUGEPAGE: honoured where THP is
 * "madvise" or "always", refused harmlessly where "never"): a step walks hundreds of MB whose
 * 4 KiB pages overflow the TLB (docs/bench-peer.md). The memset touches every page either way. */
enum { HUGE_PAGE_BYTES = 2 << 20 };

static float *aligned_zeroed_floats(size_t count, const char *what, int huge_pages) {
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    const int huge = huge_pages && bytes >= HUGE_PAGE_BYTES;
    if (huge)
        bytes = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    void *p = NULL;
    RP_CHECK(posix_memalign(&p, huge ? HUGE_PAGE_BYTES : 64, bytes ? bytes : 64) == 0,
             "out of memory allocating %.2f GB (%zu floats) for %s", (double)bytes / 1e9, count, what);
    if (huge)
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: a kernel without THP refuses it, harmlessly */
    memset(p, 0, bytes);
    return p;
}

float *xalloc_floats_for(size_t count, const char *what) { return aligned_zeroed_floats(count, what, 1); }

float *xalloc_floats_transient(size_t count, const char *what) { return aligned_zeroed_floats(count, what, 0); }

int omp_region_worthwhile(int threads) { return threads > 1 || omp_get_level() > 0; }

void zero_floats(float *x, size_t count) {
#pragma omp parallel
    {
        size_t threads = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t lo = count * t / threads, hi = count * (t + 1) / threads;
        memset(x + lo, 0, sizeof(float) * (hi - lo));
    }
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void format_float(char *out, size_t size, float v) {
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(out, size, "%.*g", digits, (double)v);
        if (strtof(out, NULL) == v)
            return;
    }
}

int parse_decimal(const char *text, double *out) {
    if (!*text || !strchr("+-.0123456789", *text) || strpbrk(text, "xX"))
        return 0;  // strtod would also read " 1", "0x10", "inf" and "nan"
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

int parse_switch(const char *text, int *on) {
    static const char *const words[][2] = {{"1", "0"}, {"yes", "no"}, {"true", "false"}, {"on", "off"}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        for (int value = 0; value < 2; value++)
            if (!strcasecmp(text, words[i][1 - value])) {
                *on = value;
                return 1;
            }
    return 0;
}

int env_switch(const char *name, int fallback) {
    const char *text = getenv(name);
    if (!text || !*text)
        return fallback;
    int on = fallback;
    RP_CHECK(parse_switch(text, &on), "environment variable %s: expected %s, got '%s'", name, SWITCH_VALUES, text);
    return on;
}

int cpu_has_avx512_loops(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

const char *enum_name(const char *const *names, int value) {
    for (int i = 0; names[i]; i++)
        if (i == value)
            return names[i];
    return "?";
}
