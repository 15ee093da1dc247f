/* The shard being filled by a prepare: both splits' tokens and offsets in memory, grown as
 * documents are added, and the digest of its contents. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int32_t *tokens;
    int64_t num_tokens, cap_tokens;
    int64_t *sentence_offsets; /* [num_sentences + 1] */
    int64_t num_sentences, cap_sentences;
    int64_t *document_offsets; /* [num_documents + 1] */
    int64_t num_documents, cap_documents;
} SplitBuffer;

/* One shard being filled, with the counts of the input it covers. */
typedef struct {
    SplitBuffer split[2]; /* 0 train, 1 eval */
    int64_t *token_counts; /* [vocab_size] of the train split */
    int vocab_size;
    int64_t bad_records, dropped_sentences;
} ShardBuffer;

void shard_buffer_init(ShardBuffer *b, int vocab_size);
void shard_buffer_clear(ShardBuffer *b);
void shard_buffer_free(ShardBuffer *b);
/* Append one document (sentence lengths len[0, n), their tokens concatenated) to split 0 or 1. */
void shard_buffer_add_document(ShardBuffer *b, int split, const int32_t *tokens,
                               const int64_t *len, int64_t n);
int64_t shard_buffer_tokens(const ShardBuffer *b);

/* A digest of a shard's contents: hash_bytes (core/rng.h) chained over both splits' tokens, sentence and
 * document offsets. Unlike the file's CRC-32 (whose HDF5 object headers carry creation times)
 * it is the same for the same documents however often and by whom the shard is written, so the
 * index that lists it stays byte-identical across --part runs and resumes. */
uint64_t shard_buffer_digest(const ShardBuffer *b);
