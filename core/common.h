/* Error handling, logging and small allocation helpers shared by every module. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/dist.h"
#include "core/paths.h" /* require_regular_file, IoPlan: every path read or written */

/* Print "realpos: error: ..." and exit(1). Every bad input ends here with a message that names
 * the file, key or dataset and what was expected. In a job of several MPI ranks the exit is
 * MPI_Abort (core/dist.h), so one rank's error stops every rank with its message. */
#define RP_FATAL(...)                                                                              \
    do {                                                                                           \
        fflush(stdout);                                                                            \
        fprintf(stderr, "realpos: error: ");                                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        dist_fatal_exit();                                                                         \
    } while (0)

#define RP_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            RP_FATAL(__VA_ARGS__);                                                                 \
    } while (0)

/* Informational log line on stderr, prefixed with the wall-clock time (rank 0 only in an MPI job). */
void rp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *xmalloc(size_t bytes);
void *xcalloc(size_t count, size_t size);
char *xstrdup(const char *s);
/* 64-byte aligned allocation (free with free()); contents zeroed. */
float *xalloc_floats(size_t count);
/* The same; out of memory names `what` (the config keys that set the size) and the size. */
float *xalloc_floats_for(size_t count, const char *what);

/* Whole file into a NUL-terminated buffer (caller frees); *len gets its size. Fatal, naming the
 * path and `what` (e.g. "vocabulary ([data] vocab)"), if it is not a regular file
 * (require_regular_file: a FIFO would block, a directory read as garbage) or cannot be read. */
char *read_file(const char *path, size_t *len, const char *what);
/* The rest of an open stream (e.g. stdin) the same way; `name` names it in messages. */
char *read_stream(FILE *f, const char *name, size_t *len, const char *what);

/* Write `len` bytes to PATH.tmp.PID, fsync, rename to path; fatal on failure, naming the path and
 * the system's reason, after removing the temporary file. */
void write_file(const char *path, const void *data, size_t len);

/* mkdir -p; fatal on failure. */
void mkdir_p(const char *path);

/* The shortest %g text that reads back as the same float (at most 9 significant digits): the
 * one float formatter of configs and file attributes. */
void format_float(char *out, size_t size, float v);

/* names[value] of a NULL-terminated list of enum value names; "?" when value is out of range. */
const char *enum_name(const char *const *names, int value);
/* Temporary files are NAME.tmp.PID; remove those in dir whose writing process no longer exists
 * (a killed save), logging each. */
void remove_stale_temp_files(const char *dir);
/* The directory part of path ("." if none). */
void path_directory(char *out, size_t size, const char *path);


/* Seconds since an arbitrary monotonic origin. */
double now_seconds(void);

/* CPU seconds used by this process so far, all threads together. */
double cpu_seconds(void);
