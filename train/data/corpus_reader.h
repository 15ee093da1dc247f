/* Corpus input: byte streams of plain, gzip or zstd files (detected by their magic bytes, never
 * by name), and the expansion of [data] corpus entries (files, directories, globs) into the list
 * of files prepare reads.
 *
 * A file listed twice (the same device and inode: a second spelling, a symlink, a hard link, a
 * directory that contains it) is an error naming both entries. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "train/config/config.h"

typedef enum { COMPRESSION_NONE = 0, COMPRESSION_GZIP, COMPRESSION_ZSTD } Compression;

typedef struct CorpusReader CorpusReader;

/* Open path for reading; fatal (naming it) if it cannot be opened. */
CorpusReader *corpus_reader_open(const char *path);
Compression corpus_reader_compression(const CorpusReader *r);
/* "plain", "gzip", "zstd" */
const char *compression_name(Compression c);
/* Up to cap decompressed bytes into buf; 0 only at the end of the stream. Fatal, naming the
 * file, on a read error or corrupt compressed data (a truncated gzip or zstd file included). */
size_t corpus_reader_read(CorpusReader *r, char *buf, size_t cap);
void corpus_reader_close(CorpusReader *r);

/* The format data.corpus_format gives path: jsonl or text, or with `auto` (the default) by the
 * name: JSON Lines iff it ends in .jsonl, .json or .ndjson, before any .gz/.gzip/.zst/.zstd
 * (case ignored). Never by the content: a file's set must not depend on its first record. */
int corpus_file_is_jsonl(const DataConfig *data, const char *path);

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
