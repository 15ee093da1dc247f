/* The shard being filled (shard_buffer.h). */
#include "train/data/shard_buffer.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"

/* ---- the shard being filled ------------------------------------------------------------------ */

static void *grow(void *p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap)
        return p;
    int64_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    p = realloc(p, (size_t)c * elem);
    RP_CHECK(p, "out of memory filling a shard (%lld elements of %zu bytes): lower data.shard_tokens",
             (long long)c, elem);
    *cap = c;
    return p;
}

void shard_buffer_init(ShardBuffer *b, int vocab_size) {
    memset(b, 0, sizeof *b);
    b->vocab_size = vocab_size;
    b->token_counts = xcalloc((size_t)vocab_size, sizeof *b->token_counts);
    shard_buffer_clear(b);
}

void shard_buffer_clear(ShardBuffer *b) {
    for (int k = 0; k < 2; k++) {
        SplitBuffer *sb = &b->split[k];
        sb->num_tokens = sb->num_sentences = sb->num_documents = 0;
        sb->sentence_offsets = grow(sb->sentence_offsets, &sb->cap_sentences, 1, sizeof(int64_t));
        sb->document_offsets = grow(sb->document_offsets, &sb->cap_documents, 1, sizeof(int64_t));
        sb->sentence_offsets[0] = sb->document_offsets[0] = 0;
    }
    memset(b->token_counts, 0, (size_t)b->vocab_size * sizeof *b->token_counts);
    b->bad_records = b->dropped_sentences = 0;
}

void shard_buffer_free(ShardBuffer *b) {
    for (int k = 0; k < 2; k++) {
        free(b->split[k].tokens);
        free(b->split[k].sentence_offsets);
        free(b->split[k].document_offsets);
    }
    free(b->token_counts);
}

int64_t shard_buffer_tokens(const ShardBuffer *b) {
    return b->split[0].num_tokens + b->split[1].num_tokens;
}

void shard_buffer_add_document(ShardBuffer *b, int split, const int32_t *tokens, const int64_t *len,
                               int64_t n) {
    SplitBuffer *sb = &b->split[split];
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += len[i];
    sb->tokens = grow(sb->tokens, &sb->cap_tokens, sb->num_tokens + total, sizeof(int32_t));
    sb->sentence_offsets =
        grow(sb->sentence_offsets, &sb->cap_sentences, sb->num_sentences + n + 1, sizeof(int64_t));
    sb->document_offsets =
        grow(sb->document_offsets, &sb->cap_documents, sb->num_documents + 2, sizeof(int64_t));
    memcpy(sb->tokens + sb->num_tokens, tokens, (size_t)total * sizeof *tokens);
    if (split == 0)
        for (int64_t i = 0; i < total; i++)
            b->token_counts[tokens[i]]++;
    for (int64_t i = 0; i < n; i++) {
        sb->num_tokens += len[i];
        sb->sentence_offsets[++sb->num_sentences] = sb->num_tokens;
    }
    sb->document_offsets[++sb->num_documents] = sb->num_sentences;
}

uint64_t shard_buffer_digest(const ShardBuffer *b) {
    uint64_t h = hash64(0x646967657374ULL); /* "digest" */
    for (int k = 0; k < 2; k++) {
        const SplitBuffer *sb = &b->split[k];
        h = hash64(h ^ hash_bytes((const char *)sb->tokens, (size_t)sb->num_tokens * sizeof *sb->tokens));
        h = hash64(h ^ hash_bytes((const char *)sb->sentence_offsets,
                                 (size_t)(sb->num_sentences + 1) * sizeof *sb->sentence_offsets));
        h = hash64(h ^ hash_bytes((const char *)sb->document_offsets,
                                 (size_t)(sb->num_documents + 1) * sizeof *sb->document_offsets));
    }
    return h ? h : 1; /* 0 means unknown */
}
