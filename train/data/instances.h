/* Masked-LM training instances from a shard (in memory or a lazily read shard set): RoBERTa FULL-SENTENCES packing and BERT's
 * dynamic masking, with no allocation after creation.
 *
 * Packing. Each row is [CLS] c_1 ... c_n [SEP] [PAD]...; the content c is consecutive whole
 * sentences in document order, n <= target, where target = max_seq_len - 2 or, with
 * probability short_seq_prob, uniform in [2, max_seq_len - 2] (google-research/bert's
 * short_seq_prob, applied to the content length). When a document ends, the next one in the epoch
 * order follows after a [SEP] (RoBERTa FULL-SENTENCES) if its first sentence fits as well. A
 * sentence that does not fit starts the next row; one longer than the row's target is split
 * there, its rest starting the next row (no token is dropped). Each epoch visits every document
 * once, in an order shuffled by a pure function of (seed, epoch).
 *
 * Masking (google-research/bert create_masked_lm_predictions, drawn anew for every row). The
 * candidates are the content tokens other than [CLS]/[SEP]/[PAD]; with whole_word_mask, a token
 * and its following "##" pieces form one candidate. k = min(max_predictions_per_seq,
 * max(1, round(n_candidate_tokens * masked_lm_prob))) (bert counts [CLS] and [SEP] in n too).
 * Candidates are visited in random order and taken whole while the total stays <= k. Each chosen
 * token: 80% -> [MASK], 10% -> a random id, uniform over the vocabulary minus the five special
 * tokens, 10% unchanged; its label is the original id, every other label is IGNORE_LABEL (-100).
 *
 * Eval mode: documents in shard order, no short rows, and instance_stream_rewind before each
 * evaluation gives the same rows and masks every time.
 *
 * Resume: InstanceState (RNG, epoch, position) is a small POD; instance_state_get after step N
 * and instance_state_set on a stream created with the same shard and options continue with
 * bit-identical batches. Positions are global over a set's documents, so the same words serve
 * one shard or many.
 *
 * Memory: the document order (8 bytes per document of the split) and one row's buffers; tokens
 * and offsets of a lazy shard set are read as the rows need them. */
#pragma once
#include <stdint.h>

#include "train/config/config.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/data/shard.h"
#include "train/data/tokenizer.h"


typedef struct {
    int batch_size, max_seq_len;
    float short_seq_prob, masked_lm_prob;
    int max_predictions_per_seq, whole_word_mask;
    uint64_t seed;
    int eval; /* 1: deterministic evaluation stream (see above) */
} InstanceOptions;

/* Options from the [data] section. */
InstanceOptions instance_options(const DataConfig *data, int batch_size, int eval);

/* One batch, row-major [batch_size, seq_len]; token_type_ids are all 0 (no next-sentence task). */
typedef struct {
    int batch_size, seq_len;
    int *input_ids, *token_type_ids, *attention_mask, *labels;
    int num_predictions; /* labels != IGNORE_LABEL in the batch */
    int num_tokens;      /* attention_mask == 1 in the batch */
} InstanceBatch;

InstanceBatch *instance_batch_create(int batch_size, int seq_len);
void instance_batch_free(InstanceBatch *b);

/* Everything that changes as a stream runs; the rest is fixed by (shard, options). */
typedef struct {
    Rng rng;                /* short lengths and masks */
    uint64_t epoch;         /* completed passes over the documents */
    uint64_t order_pos;     /* next document, as an index into this epoch's order */
    uint64_t sentence;      /* next sentence within that document (== count: exhausted) */
    uint64_t token;         /* next token within that sentence (a split long sentence) */
    uint64_t rows;          /* rows produced so far */
    uint64_t num_documents; /* of the shard, checked by instance_state_set */
} InstanceState;

#define INSTANCE_STATE_WORDS 10
/* Fixed word layout for checkpoints (e.g. h5_write_uint64s): s[0..3] epoch order_pos sentence
 * token rows num_documents. */
void instance_state_pack(const InstanceState *st, uint64_t words[INSTANCE_STATE_WORDS]);
InstanceState instance_state_unpack(const uint64_t words[INSTANCE_STATE_WORDS]);

typedef struct InstanceStream InstanceStream;

/* The stream keeps pointers to the shard (which must outlive it); the tokenizer is only read
 * here (special ids, "##" pieces). Fatal if the shard is empty or its vocabulary size differs. */
InstanceStream *instance_stream_create(const Shard *shard, const Tokenizer *tok,
                                       const InstanceOptions *opt);
void instance_stream_free(InstanceStream *s);

/* Fill b (whose shape must be batch_size x max_seq_len) with the next rows. */
void instance_stream_next(InstanceStream *s, InstanceBatch *b);
/* Advance exactly as instance_stream_next on a batch of `rows` rows would (positions, epoch,
 * RNG: short lengths and mask draws), without filling a batch: for the micro-batches of other
 * MPI ranks. Reads only document and sentence offsets, no token (with whole_word_mask the rows'
 * tokens too: the mask draws depend on where words start). */
void instance_stream_skip(InstanceStream *s, int rows);
/* Back to the initial state (epoch 0, first document, RNG seeded afresh). */
void instance_stream_rewind(InstanceStream *s);

InstanceState instance_state_get(const InstanceStream *s);
/* Fatal if the state does not belong to this shard or is out of range. */
void instance_state_set(InstanceStream *s, const InstanceState *st);
