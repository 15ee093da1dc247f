/* One writer per directory: an exclusive flock(2) on DIR/.lock, which the kernel releases when the
 * process exits however it exits (kill -9 included), so a lock is never left stale. The file
 * holds the owner's PID and command line, so that a second writer fails at once naming them:
 *   realpos: error: runs/x is in use by process 4242 (realpos pretrain p.ini): ...
 * Used for run directories (train/loop/run_dir.h) and shard directories (`realpos prepare`). */
#pragma once

typedef struct {
    int fd;              /* the open, locked DIR/.lock; -1: not held */
    char path[4096 + 64]; /* DIR/.lock */
} DirLock;

/* Lock dir (created if missing) for this process or fail, naming the holder and `what` (e.g.
 * "key 'train.run_dir'") and what to do. */
void dir_lock_acquire(DirLock *lock, const char *dir, const char *what);
/* The same on DIR/name, shared (any number of shared holders, no exclusive one) or exclusive:
 * e.g. `prepare --part I/N` holds .lock shared and .lock-part-I-of-N exclusively, so parts run
 * side by side while a whole prepare (.lock exclusive) excludes them all. */
void dir_lock_acquire_as(DirLock *lock, const char *dir, const char *name, int shared, const char *what);
/* Release (also what process exit does). */
void dir_lock_release(DirLock *lock);
