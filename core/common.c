#define _POSIX_C_SOURCE 200809L
#include "core/common.h"

#include "core/io/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <string.h>
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

float *xalloc_floats_for(size_t count, const char *what) {
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    void *p = NULL;
    RP_CHECK(posix_memalign(&p, 64, bytes ? bytes : 64) == 0,
             "out of memory allocating %.2f GB (%zu floats) for %s", (double)bytes / 1e9, count, what);
    memset(p, 0, bytes);
    return p;
}

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

char *read_file(const char *path, size_t *len, const char *what) {
    require_regular_file(path, what);
    FILE *f = fopen(path, "rb");
    RP_CHECK(f, "%s: cannot open %s: %s", path, what, strerror(errno));
    char *buf = read_stream(f, path, len, what);
    fclose(f);
    return buf;
}

char *read_stream(FILE *f, const char *name, size_t *len, const char *what) {
    size_t cap = 1 << 16, used = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        size_t got = fread(buf + used, 1, cap - used - 1, f);
        used += got;
        if (used + 1 < cap) {
            RP_CHECK(!ferror(f), "%s: error reading %s: %s", name, what, strerror(errno));
            if (feof(f))
                break;
            continue;
        }
        cap *= 2;
        buf = realloc(buf, cap);
        RP_CHECK(buf, "out of memory reading %s", name);
    }
    buf[used] = '\0';
    if (len)
        *len = used;
    return buf;
}

/* mkdir -p; 0 or the errno, with the directory that failed in failed[size]. */
static int make_directories(const char *path, char *failed, size_t size) {
    char partial[4096];
    size_t n = strlen(path);
    snprintf(failed, size, "%s", path);
    if (n == 0 || n >= sizeof partial)
        return ENAMETOOLONG;
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        memcpy(partial, path, i);
        partial[i] = '\0';
        if (mkdir(partial, 0755) != 0 && errno != EEXIST) {
            snprintf(failed, size, "%s", partial);
            return errno;
        }
    }
    return 0;
}

int mkdir_p_try(const char *path) {
    char failed[4096];
    return make_directories(path, failed, sizeof failed);
}

void mkdir_p(const char *path) {
    char failed[4096];
    int err = make_directories(path, failed, sizeof failed);
    RP_CHECK(!err, "cannot create directory '%s': %s", failed, strerror(err));
}

void format_float(char *out, size_t size, float v) {
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(out, size, "%.*g", digits, (double)v);
        if (strtof(out, NULL) == v)
            return;
    }
}

const char *enum_name(const char *const *names, int value) {
    for (int i = 0; names[i]; i++)
        if (i == value)
            return names[i];
    return "?";
}

void write_file(const char *path, const void *data, size_t len) {
    char why[3 * 4096];
    RP_CHECK(write_file_status(path, data, len, why, sizeof why) == 0, "%s", why);
}

long temp_name_stale_pid(const char *name) {
    const char *tail = strstr(name, ".tmp.");
    char *end;
    if (!tail)
        return 0;
    long pid = strtol(tail + 5, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return 0;
    return pid;
}

void remove_stale_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const long pid = temp_name_stale_pid(e->d_name);
        if (!pid)
            continue; /* not ours to judge: a malformed name, or a writer that is still alive */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0)
            rp_log("removed %s, left by a save that was killed (process %ld is gone)", path, pid);
    }
    closedir(d);
}

void path_directory(char *out, size_t size, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, size, ".");
    else if (slash == path)
        snprintf(out, size, "/");
    else
        snprintf(out, size, "%.*s", (int)(slash - path), path);
}
