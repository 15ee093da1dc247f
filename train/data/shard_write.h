/* Writing a shard set (format in shard_set.h): shard files (from a ShardBuffer), source manifests
 * and the index. Used by corpus_prepare.c and shard_parts.c. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/corpus_list.h"
#include "train/data/corpus_reader.h"
#include "train/data/shard.h"
#include "train/data/shard_buffer.h"
#include "train/data/shard_settings.h"

typedef struct {
    SplitCounts train, eval;
    int64_t bad_records, dropped_sentences;
    uint64_t digest; /* shard_buffer_digest of its contents; 0: unknown (a shard of an older realpos) */
} ShardCounts;

/* Write shard k of source (temp file + rename); returns its counts. */
ShardCounts shard_write(const SetSettings *s, const CorpusFile *source, const char *stem, int k,
                        const ShardBuffer *b, int64_t input_end, int64_t line_end);
/* Shard k of source if it exists, is sealed intact and was made by these settings from this
 * version of the source: 1 and its counts, input_end and line_end; else 0. */
int shard_write_kept(const SetSettings *s, const CorpusFile *source, const char *stem, int k,
                     ShardCounts *counts, int64_t *input_end, int64_t *line_end);

/* A source's manifest: shards 0..num_shards-1 with their counts. */
void shard_write_manifest(const SetSettings *s, const CorpusFile *source, const char *stem,
                          Compression compression, const char *format, const ShardCounts *shards,
                          int num_shards);
/* 1 if the source's manifest exists and matches the settings and this version of the source;
 * with verify, each of its shards must also be sealed intact. Adds its totals to *total. */
int shard_write_manifest_done(const SetSettings *s, const CorpusFile *source, const char *stem,
                              int verify, ShardCounts *total);
/* index.json from the manifests of every source (all done) and the sum of the shards'
 * train/token_counts (each shard read through its seal); fatal if a split is empty or a shard
 * fails its seal. */
void shard_write_index(const SetSettings *s, const CorpusList *list);
