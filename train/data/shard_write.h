/* Writing a shard set (format in shard_set.h): the in-memory shard being filled, shard files,
 * source manifests and the index. Used by corpus_prepare.c only. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/corpus.h"
#include "train/data/corpus_reader.h"

typedef struct {
    int32_t *tokens;
    int64_t num_tokens, cap_tokens;
    int64_t *sentence_offsets; /* [num_sentences + 1] */
    int64_t num_sentences, cap_sentences;
    int64_t *document_offsets; /* [num_documents + 1] */
    int64_t num_documents, cap_documents;
} SplitBuffer;

/* The settings every shard of a set shares (prepare_id is their hash, as 16 hex digits). */
typedef struct {
    const DataConfig *data;
    char vocab_md5[33];
    int vocab_size;
    char prepare_id[17];
} SetSettings;

/* One shard being filled, with the counts of the input it covers. */
typedef struct {
    SplitBuffer split[2]; /* 0 train, 1 eval */
    int64_t *token_counts; /* [vocab_size] of the train split */
    int vocab_size;
    int64_t bad_records, dropped_sentences;
} ShardBuffer;

typedef struct {
    SplitCounts train, eval;
    int64_t bad_records, dropped_sentences;
} ShardCounts;

/* 64-bit hash of a byte string: each 8-byte word (the tail zero-padded) mixed through hash64. */
uint64_t text_hash(const char *p, size_t n);

void settings_init(SetSettings *s, const DataConfig *data, const char *vocab_md5, int vocab_size);
/* "s<16 hex digits>": the file stem of a source's shards and manifest. */
void source_stem(char out[18], const SetSettings *s, const char *source_path);

void shard_buffer_init(ShardBuffer *b, int vocab_size);
void shard_buffer_clear(ShardBuffer *b);
void shard_buffer_free(ShardBuffer *b);
/* Append one document (sentence lengths len[0, n), their tokens concatenated) to split 0 or 1. */
void shard_buffer_add_document(ShardBuffer *b, int split, const int32_t *tokens,
                               const int64_t *len, int64_t n);
int64_t shard_buffer_tokens(const ShardBuffer *b);

/* Write shard k of source (temp file + rename); returns its counts. */
ShardCounts shard_write(const SetSettings *s, const CorpusFile *source, const char *stem, int k,
                        const ShardBuffer *b, int64_t input_end, int64_t line_end);
/* Shard k of source if it exists, is sealed intact and was made by these settings from this
 * version of the source: 1 and its counts, input_end and line_end; else 0. */
int shard_kept(const SetSettings *s, const CorpusFile *source, const char *stem, int k,
               ShardCounts *counts, int64_t *input_end, int64_t *line_end);

/* A source's manifest: shards 0..num_shards-1 with their counts. */
void manifest_write(const SetSettings *s, const CorpusFile *source, const char *stem,
                    Compression compression, const char *format, const ShardCounts *shards,
                    int num_shards);
/* 1 if the source's manifest exists and matches the settings and this version of the source;
 * with verify, each of its shards must also be sealed intact. Adds its totals to *total. */
int manifest_done(const SetSettings *s, const CorpusFile *source, const char *stem, int verify,
                  ShardCounts *total);
/* index.json from the manifests of every source (all done) and the sum of the shards'
 * train/token_counts (each shard read through its seal); fatal if a split is empty or a shard
 * fails its seal. */
void index_write(const SetSettings *s, const CorpusList *list);
