/* Whole-file writes: temp + fsync + rename (atomic_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/io/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/paths.h"

int atomic_file_open(AtomicFile *a, const char *path, char *why, size_t why_size) {
    memset(a, 0, sizeof *a);
    if (!path[0] || strlen(path) >= sizeof a->path) {
        snprintf(why, why_size, "%s: cannot write: %s", path[0] ? path : "(empty path)",
                 path[0] ? "path too long" : "expected a path");
        return -1;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        snprintf(why, why_size, "%s: cannot create %s: %s", path, a->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int sync_directory(const char *path) {
    char dir[PATH_MAX];
    path_directory(dir, sizeof dir, path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int atomic_file_commit(AtomicFile *a, char *why, size_t why_size) {
    int failed = 0, err = 0, last = errno;
    if (a->error || ferror(a->f)) { /* an earlier write failed: its errno, else the last one, else EIO */
        failed = 1, err = a->error ? a->error : last ? last : EIO;
    } else if (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0) {
        failed = 1, err = errno;
    }
    if (fclose(a->f) != 0 && !failed)
        failed = 1, err = errno;
    a->f = NULL;
    if (failed) {
        unlink(a->tmp);
        snprintf(why, why_size, "%s: cannot write: %s (the incomplete %s was removed)", a->path, strerror(err),
                 a->tmp);
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        err = errno;
        unlink(a->tmp);
        snprintf(why, why_size, "%s: cannot rename %s onto it: %s (removed it)", a->path, a->tmp, strerror(err));
        return -1;
    }
    sync_directory(a->path); /* best effort: the file itself is complete and in place */
    return 0;
}

void atomic_file_abort(AtomicFile *a) {
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    unlink(a->tmp);
}

FILE *atomic_file_open_or_die(AtomicFile *a, const char *path) {
    char why[PATH_MAX + 256];
    RP_CHECK(atomic_file_open(a, path, why, sizeof why) == 0, "%s", why);
    return a->f;
}

void atomic_file_commit_or_die(AtomicFile *a) {
    char why[3 * PATH_MAX];
    RP_CHECK(atomic_file_commit(a, why, sizeof why) == 0, "%s", why);
}

int write_file_status(const char *path, const void *data, size_t len, char *why, size_t why_size) {
    AtomicFile a;
    if (atomic_file_open(&a, path, why, why_size) != 0)
        return -1;
    if (fwrite(data, 1, len, a.f) != len)
        a.error = errno ? errno : EIO; /* commit reports it and removes the file */
    return atomic_file_commit(&a, why, why_size);
}

void remove_temp_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        char path[2 * PATH_MAX];
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}
