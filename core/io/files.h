/* Whole files in and out (a file read whole, refused unless it is a regular file; a file
 * written whole or not at all), directories, and the temporaries of writers that died. */
#pragma once
#include <stddef.h>
#include <stdio.h>

/* Whole file into a NUL-terminated buffer (caller frees); *len gets its size. Fatal, naming the
 * path and `what` (e.g. "vocabulary ([data] vocab)"), if it is not a regular file
 * (require_regular_file: a FIFO would block, a directory read as garbage) or cannot be read. */
char *read_file(const char *path, size_t *len, const char *what);
/* The rest of an open stream (e.g. stdin) the same way; `name` names it in messages. */
char *read_stream(FILE *f, const char *name, size_t *len, const char *what);

/* Write `len` bytes to PATH.tmp.PID, fsync, rename to path; fatal on failure, naming the path and
 * the system's reason, after removing the temporary file. */
void write_file(const char *path, const void *data, size_t len);

/* mkdir -p; fatal on failure. mkdir_p_try returns 0 or the errno instead. */
void mkdir_p(const char *path);
int mkdir_p_try(const char *path);

/* Temporary files are NAME.tmp.PID; remove those in dir whose writing process no longer exists
 * (a killed save), logging each. */
void remove_stale_temp_files(const char *dir);
/* The PID of a temporary name NAME.tmp.PID whose writer is gone (not this process, not alive),
 * else 0: a malformed name, or a writer that may still be writing. */
long temp_name_stale_pid(const char *name);
