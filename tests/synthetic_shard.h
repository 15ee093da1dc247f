/* Synthetic shards over the fixture vocabulary, shared by tests/train/data/test_instances.c and
 * tests/train/data/test_masking.c: documents recognisable by their first token, sentences of varied length
 * (some longer than a row), "##" pieces to exercise whole-word masking. */
#pragma once
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "train/data/instances.h"
#include "train/data/tokenizer.h"

#define VOCAB "tests/fixtures/corpus/vocab.txt"
#define NUM_DOCS 12
#define MAX_L 64

typedef struct {
    SpecialTokens sp;
    int vocab_size;
    int words[64], num_words; /* plain ids; words[0, NUM_DOCS) only ever start a document */
    int pieces[16], num_pieces;
} Vocab;

static inline int is_special(const Vocab *v, int id) {
    return id == v->sp.pad || id == v->sp.unk || id == v->sp.cls || id == v->sp.sep ||
           id == v->sp.mask;
}

static inline Vocab vocab_info(const Tokenizer *tok) {
    Vocab v = {.sp = tokenizer_special(tok), .vocab_size = tokenizer_vocab_size(tok)};
    for (int id = 0; id < v.vocab_size; id++) {
        if (is_special(&v, id))
            continue;
        if (tokenizer_is_continuation(tok, id))
            v.pieces[v.num_pieces++] = id;
        else
            v.words[v.num_words++] = id;
    }
    return v;
}

static inline Shard *new_shard(int64_t max_tokens, int64_t max_sentences, int64_t num_docs,
                               int vocab_size) {
    Shard *s = xcalloc(1, sizeof *s);
    strcpy(s->path, "synthetic");
    s->tokens = xmalloc((size_t)max_tokens * sizeof *s->tokens);
    s->sentence_offsets = xmalloc((size_t)(max_sentences + 1) * sizeof(int64_t));
    s->document_offsets = xmalloc((size_t)(num_docs + 1) * sizeof(int64_t));
    s->num_documents = num_docs;
    s->vocab_size = vocab_size;
    s->sources = xstrdup("synthetic");
    return s;
}

/* NUM_DOCS documents of 1-8 sentences; a sentence has 1-20 tokens, or 40-100 one time in ten
 * (longer than a row of 32); 30% "##" pieces after a sentence's first token. Document d starts
 * with words[d], which occurs nowhere else. */
static inline Shard *synthetic_shard(const Vocab *v, uint64_t seed) {
    Shard *s = new_shard(NUM_DOCS * 8 * 100, NUM_DOCS * 8, NUM_DOCS, v->vocab_size);
    Rng rng;
    rng_seed(&rng, seed);
    int64_t t = 0, n = 0;
    for (int d = 0; d < NUM_DOCS; d++) {
        s->document_offsets[d] = n;
        int num_sentences = 1 + (int)rng_below(&rng, 8);
        for (int j = 0; j < num_sentences; j++) {
            s->sentence_offsets[n++] = t;
            int len = rng_below(&rng, 10) == 0 ? 40 + (int)rng_below(&rng, 61)
                                               : 1 + (int)rng_below(&rng, 20);
            for (int i = 0; i < len; i++) {
                if (j == 0 && i == 0)
                    s->tokens[t++] = v->words[d];
                else if (i > 0 && rng_uniform(&rng) < 0.3f)
                    s->tokens[t++] = v->pieces[rng_below(&rng, (uint64_t)v->num_pieces)];
                else
                    s->tokens[t++] =
                        v->words[NUM_DOCS + rng_below(&rng, (uint64_t)(v->num_words - NUM_DOCS))];
            }
        }
    }
    s->sentence_offsets[n] = t;
    s->document_offsets[NUM_DOCS] = n;
    s->num_tokens = t;
    s->num_sentences = n;
    return s;
}

/* One document of `count` one-token sentences: every row fills its target exactly. */
static inline Shard *one_token_sentences(const Vocab *v, int64_t count) {
    Shard *s = new_shard(count, count, 1, v->vocab_size);
    for (int64_t i = 0; i <= count; i++)
        s->sentence_offsets[i] = i;
    for (int64_t i = 0; i < count; i++)
        s->tokens[i] = v->words[NUM_DOCS + i % (v->num_words - NUM_DOCS)];
    s->document_offsets[0] = 0;
    s->document_offsets[1] = count;
    s->num_tokens = s->num_sentences = count;
    return s;
}

/* Row r as it was before masking (labels where set, inputs elsewhere); returns its length. */
static inline int original_row(const InstanceBatch *b, int r, int *out) {
    int n = 0;
    for (int l = 0; l < b->seq_len; l++) {
        int i = r * b->seq_len + l;
        out[l] = b->labels[i] != IGNORE_LABEL ? b->labels[i] : b->input_ids[i];
        n += b->attention_mask[i];
    }
    return n;
}

static inline InstanceOptions options(int batch_size, int seq_len, int eval) {
    InstanceOptions o = {.batch_size = batch_size,
                         .max_seq_len = seq_len,
                         .short_seq_prob = 0.1f,
                         .masked_lm_prob = 0.15f,
                         .max_predictions_per_seq = seq_len,
                         .whole_word_mask = 0,
                         .seed = 1234,
                         .eval = eval};
    return o;
}
