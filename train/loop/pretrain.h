/* MLM pretraining: the training loop behind `realpos pretrain` and held-out evaluation behind
 * `realpos eval`. */
#pragma once
#include <hdf5.h>

#include "core/config.h"
#include "optim/adamw.h"
#include "train/data/corpus.h"
#include "train/data/instances.h"
#include "train/model/model.h"
#include "train/data/tokenizer.h"

typedef struct {
    double loss, accuracy, perplexity;
    double unigram_accuracy; /* baseline: always predict the most frequent training token */
    long predictions;
} EvalResult;

/* Held-out MLM loss/accuracy/perplexity over `num_batches` batches of a rewound eval stream;
 * unigram_token is the baseline's prediction (see shard_most_frequent_token). */
EvalResult evaluate_mlm(const Model *m, Activations *acts, InstanceStream *eval_stream,
                        InstanceBatch *batch, int num_batches, int unigram_token);

/* The most frequent token of a shard that is not a special token. */
int shard_most_frequent_token(const Shard *shard, SpecialTokens special);

/* Vocabulary stored in checkpoints: dataset /vocab (the vocab.txt text) with attribute
 * do_lower_case. Returns NULL if the checkpoint has none. */
char *checkpoint_read_vocab(hid_t file, const char *path, int *do_lower_case);
void checkpoint_write_vocab(hid_t file, const char *vocab_text, int do_lower_case);
