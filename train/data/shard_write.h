/* Writing a shard set (format in shard_set.h): the in-memory shard being filled, shard files,
 * source manifests and the index. Used by corpus_prepare.c only. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/shard.h"
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
    uint64_t digest; /* shard_digest of its contents; 0: unknown (a shard of an older realpos) */
} ShardCounts;

/* 64-bit hash of a byte string: each 8-byte word (the tail zero-padded) mixed through hash64. */
uint64_t text_hash(const char *p, size_t n);

/* A digest of a shard's contents: text_hash chained over both splits' tokens, sentence and
 * document offsets. Unlike the file's CRC-32 (whose HDF5 object headers carry creation times)
 * it is the same for the same documents however often and by whom the shard is written, so the
 * index that lists it stays byte-identical across --part runs and resumes. */
uint64_t shard_digest(const ShardBuffer *b);

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

/* ---- the writer's side of a prepare in progress (shard_parts.c) ------------------------------ */

/* tmp = PATH.tmp.PID.HOST, the temporary a shard is written to (remembered until shard_temp_end,
 * so that shard_temp_cleanup_on_signals' handler removes it if a signal ends the prepare). */
void shard_temp_begin(char *tmp, size_t size, const char *path);
void shard_temp_end(void);
/* SIGINT, SIGTERM, SIGHUP, SIGQUIT remove the shard temporary being written, then end the process
 * as the signal would have. (SIGKILL cannot be caught: shard_remove_stale_temps.) */
void shard_temp_cleanup_on_signals(void);
/* Remove dir's shard temporaries of processes of this host that are gone (and, with whole, the
 * PATH.tmp.PID temporaries without a host of dead processes: only a whole prepare may, since a
 * part on another host sharing dir cannot be judged from here). */
void shard_remove_stale_temps(const char *dir, int whole);
/* The record of dir's prepare in progress (shard_set.h: SHARD_SET_PARTS): "N\n" and the settings of
 * s (shard_settings.h) as JSON, created atomically (link(2)): of processes starting side by side,
 * one records its N and settings and the others compare with them. Fatal, naming each setting and
 * both values, if a prepare in progress recorded other settings (except a whole prepare after a
 * stopped whole prepare: it starts over, replacing the record). Returns num_parts, or the other N
 * recorded: then the caller may go on only if no source is left to prepare, else
 * shard_set_refuse_parts. */
int shard_set_claim_parts(const SetSettings *s, int num_parts);
/* The set is about to change: remove its index.json, so that a prepare interrupted from here on
 * leaves no index beside shards it does not list (pretraining then says to run prepare). */
void shard_set_drop_index(const char *dir);
/* After this process's sources: under an exclusive lock on shard_dir/.lock-index, if every source
 * of list is done, forget the partition and write the index (unless another process did since).
 * Returns 1 if the set is complete, 0 if other parts have sources left. */
int shard_set_finish(const SetSettings *s, const CorpusList *list);
