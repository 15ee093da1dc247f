/* One writer per directory: an exclusive flock(2) on DIR/.lock, which the kernel releases when the
 * process exits however it exits (kill -9 included), so a lock is never left stale. The file
 * holds the owner's PID and command line, so that a second writer fails at once naming them:
 *   realpos: error: runs/x is in use by process 4242 (realpos pretrain p.ini): ...
 * Used for run directories (train/loop/run_dir.h) and shard directories (`realpos prepare`). */
#pragma once

typedef struct {
    int fd;              /* the open, locked DIR/.lock; -1: not held */
    char path[4096 + 8]; /* DIR/.lock */
} DirLock;

/* Lock dir (created if missing) for this process or fail, naming the holder and `what` (e.g.
 * "key 'train.run_dir'") and what to do. */
void dir_lock_acquire(DirLock *lock, const char *dir, const char *what);
/* Release (also what process exit does). */
void dir_lock_release(DirLock *lock);
