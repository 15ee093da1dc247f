/* Corpus input: byte streams of plain, gzip or zstd files (detected by their magic bytes, never
 * by name), and a file's format (text or JSON Lines). The list of files: corpus_list.h. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"

typedef enum { COMPRESSION_NONE = 0, COMPRESSION_GZIP, COMPRESSION_ZSTD } Compression;

typedef struct CorpusReader CorpusReader;

/* Open path for reading; fatal (naming it) if it cannot be opened. */
CorpusReader *corpus_reader_open(const char *path);
Compression corpus_reader_compression(const CorpusReader *r);
/* "plain", "gzip", "zstd" */
const char *corpus_reader_compression_name(Compression c);
/* Up to cap decompressed bytes into buf; 0 only at the end of the stream. Fatal, naming the
 * file, on a read error or corrupt compressed data (a truncated gzip or zstd file included). */
size_t corpus_reader_read(CorpusReader *r, char *buf, size_t cap);
void corpus_reader_close(CorpusReader *r);

/* The format data.corpus_format gives path: jsonl or text, or with `auto` (the default) by the
 * name: JSON Lines iff it ends in .jsonl, .json or .ndjson, before any .gz/.gzip/.zst/.zstd
 * (case ignored). Never by the content: a file's set must not depend on its first record. */
int corpus_reader_is_jsonl(const DataConfig *data, const char *path);
