/* Whole files in and out, directories, stale temporaries (files.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/io/files.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/atomic_file.h"
#include "core/io/paths.h"

char *read_file(const char *path, size_t *len, const char *what) {
    FILE *f = open_regular_file(path, what, 0); /* checked on the open file: no FIFO blocks, no race */
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
