/* The expansion of [data] corpus entries (files, directories, globs) into the list of files
 * prepare reads. A file listed twice (the same device and inode: a second spelling, a symlink, a
 * hard link, a directory that contains it) is an error naming both entries. */
#pragma once
#include <stdint.h>

#include "train/config/config.h"

typedef struct {
    char *path;       /* as listed, or as found under a directory or by a glob */
    int64_t size;     /* bytes on disk */
    int64_t mtime_ns; /* modification time */
} CorpusFile;

typedef struct {
    CorpusFile *files;
    int count;
} CorpusList;

/* Expand data->corpus in order: a file as is; a directory as every regular file below it whose
 * name does not start with '.', sorted by path; an entry with a `**` path component as every
 * regular file it matches at any depth (bash's globstar, pathlib: `**` is any number of
 * directories, none included; names starting with '.' skipped; symbolic links to directories
 * not followed by `**`), sorted; another entry with * ? or [ as its glob(3) matches, sorted. Fatal on an entry that matches nothing, an unreadable file, or a duplicate. */
CorpusList corpus_list_expand(const DataConfig *data);
void corpus_list_free(CorpusList *list);
