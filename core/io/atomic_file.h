/* Files written whole or not at all: the data goes to PATH.tmp.PID in the same directory, is
 * flushed and fsynced, then renamed onto PATH (and the directory fsynced), so that PATH is always
 * either the previous file or the complete new one, never a part of it (a full disk, a killed
 * process). Every failure removes the temporary file and reports the system's reason (strerror).
 * Temporary files of killed processes are removed by remove_stale_temp_files (common.h).
 *
 * The status functions return 0, or -1 with "PATH: cannot ...: REASON" in why: for callers that
 * must clean up more than the file (export-hf's temporary folder); the others are fatal. */
#pragma once
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    int error; /* errno of the first failed write, if the writer records it (else commit finds it) */
    char path[PATH_MAX];
    char tmp[PATH_MAX + 32];
} AtomicFile;

int atomic_file_open(AtomicFile *a, const char *path, char *why, size_t why_size);
/* Flush, fsync, close, rename onto the path; on any failure (including an earlier write error
 * on a->f) the temporary file is removed. */
int atomic_file_commit(AtomicFile *a, char *why, size_t why_size);
/* Close and remove the temporary file (an error path of the caller's). */
void atomic_file_abort(AtomicFile *a);

/* The same, fatal on failure. */
FILE *atomic_file_open_or_die(AtomicFile *a, const char *path);
void atomic_file_commit_or_die(AtomicFile *a);

/* fsync the directory holding path, so that a rename (or link, unlink) of path there survives a
 * crash; 0, or -1 with errno. */
int sync_directory(const char *path);

/* len bytes of data as the whole new content of path. */
int write_file_status(const char *path, const void *data, size_t len, char *why, size_t why_size);

/* Remove a temporary folder of files (no subfolders) and the folder; best effort. */
void remove_temp_dir(const char *dir);
