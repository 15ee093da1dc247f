/* One writer per directory (dir_lock.h). */
#include "core/io/dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"

/* This process's command line (/proc/self/cmdline, NULs as spaces), at most size - 1 bytes. */
static void own_command_line(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return;
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    while (n > 0 && out[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        out[i] = out[i] == '\0' || out[i] == '\n' ? ' ' : out[i];
    out[n] = '\0';
}

void dir_lock_acquire(DirLock *lock, const char *dir, const char *what) {
    dir_lock_acquire_as(lock, dir, ".lock", 0, what);
}

void dir_lock_acquire_as(DirLock *lock, const char *dir, const char *name, int shared, const char *what) {
    mkdir_p(dir);
    int n = snprintf(lock->path, sizeof lock->path, "%s/%s", dir, name);
    RP_CHECK(n > 0 && (size_t)n < sizeof lock->path, "%s (%s): path too long", dir, what);
    /* Never through a link, never a FIFO or device: the holder's line is written into this file
     * (O_NONBLOCK: opening a FIFO does not wait for a peer; the fstat below refuses it). */
    lock->fd = open(lock->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    RP_CHECK(lock->fd >= 0 || errno != ELOOP,
             "%s (%s): the lock file %s is a symbolic link: a lock file is never followed (its target would "
             "be overwritten with the holder's name); remove the link", dir, what, lock->path);
    RP_CHECK(lock->fd >= 0, "%s (%s): cannot create the lock file %s: %s", dir, what, lock->path, strerror(errno));
    struct stat kind;
    int regular = fstat(lock->fd, &kind) == 0 && S_ISREG(kind.st_mode);
    if (!regular)
        close(lock->fd);
    RP_CHECK(regular, "%s (%s): the lock file %s is not a regular file (%s): remove it", dir, what, lock->path,
             S_ISDIR(kind.st_mode) ? "a directory" : S_ISFIFO(kind.st_mode) ? "a FIFO" : "a device or socket");
    if (flock(lock->fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        int err = errno;
        char holder[512] = "";
        ssize_t got = pread(lock->fd, holder, sizeof holder - 1, 0);
        holder[got > 0 ? got : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        if (err == EWOULDBLOCK)
            RP_FATAL("%s (%s) is in use by %s: one process writes a directory at a time; wait for it to finish, "
                     "stop it, or choose another directory", dir, what, holder[0] ? holder : "another process");
        RP_FATAL("%s (%s): cannot lock %s: %s", dir, what, lock->path, strerror(err));
    }
    /* The lock file opened may have been moved away with its directory (another process's
     * --overwrite) between open and flock: the lock held must be the one at the path. */
    struct stat held, at_path;
    RP_CHECK(fstat(lock->fd, &held) == 0 && lstat(lock->path, &at_path) == 0 && held.st_dev == at_path.st_dev &&
                 held.st_ino == at_path.st_ino,
             "%s (%s) was moved aside by another process while this one took its lock: run again", dir, what);
    char command[400];
    own_command_line(command, sizeof command);
    char owner[512];
    int len = shared ? snprintf(owner, sizeof owner, "processes sharing it (such as %ld: %s)\n", (long)getpid(), command)
                     : snprintf(owner, sizeof owner, "process %ld (%s)\n", (long)getpid(), command);
    len = len < (int)sizeof owner ? len : (int)sizeof owner - 1;
    /* Informational only (the flock is the lock): a failed write leaves a lock without a name. */
    if (ftruncate(lock->fd, 0) == 0 && pwrite(lock->fd, owner, (size_t)len, 0) == len)
        fdatasync(lock->fd);
}

void dir_lock_release(DirLock *lock) {
    if (lock->fd >= 0)
        close(lock->fd); /* closing the last descriptor releases the flock */
    lock->fd = -1;
}
