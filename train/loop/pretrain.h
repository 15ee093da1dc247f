/* MLM pretraining: the training loop behind `realpos pretrain` and held-out evaluation behind
 * `realpos eval` (the commands are train/cli/cmd_pretrain.c). */
#pragma once
#include <hdf5.h>

#include "train/config/config.h"
#include "core/dist.h"
#include "optim/dp_adamw.h"
#include "train/data/corpus.h"
#include "train/data/instances.h"
#include "train/data/tokenizer.h"
#include "train/loop/metrics.h"
#include "train/loop/step.h"
#include "train/model/model.h"

/* A pretraining run: configuration, vocabulary, data streams, model, optimizer, activations. */
typedef struct {
    Config cfg;
    char *config_ini;
    char *vocab_text;
    Tokenizer *tok;
    Shard *train_shard, *eval_shard;
    InstanceStream *train_stream, *eval_stream;
    InstanceBatch *batch;
    int unigram_token; /* most frequent training token: the baseline prediction */
    Model model;
    Dist dist;   /* the MPI job (size 1 without a launcher); set before pretrain_setup */
    DpAdamW opt; /* whole moments, or this rank's ZeRO-1 shard (train.shard_optimizer) */
    Activations acts;
    long step; /* updates completed */
    MetricsLog log; /* rank 0 only */
} Trainer;

typedef struct {
    double loss, accuracy, perplexity;
    double unigram_accuracy; /* baseline: always predict the most frequent training token */
    long predictions;
} EvalResult;

/* Held-out MLM loss/accuracy/perplexity over `num_batches` batches of a rewound eval stream;
 * unigram_token is the baseline's prediction (see shard_most_frequent_token). With dist (may be
 * NULL), batch i is evaluated by rank i mod N and the sums are added over ranks. */
EvalResult evaluate_mlm(const Model *m, Activations *acts, InstanceStream *eval_stream,
                        InstanceBatch *batch, int num_batches, int unigram_token, Dist *dist);


/* From t->cfg (and t->config_ini): the model and optimizer, weights from `resume` (model, optimizer,
 * step, data-stream state), `init` (weights only) or a fresh init, the vocabulary, the data
 * streams and the activations. config_path names the config in errors. Under MPI every rank
 * reads the checkpoint (keeping its ZeRO-1 shard of the moments) and rank 0's weights are
 * broadcast, so every rank starts from the same bits. */
void pretrain_setup(Trainer *t, const char *config_path, const char *resume, const char *init);
/* Tokenizer, train/eval shards and streams, batch and unigram token for t->vocab_text;
 * vocab_origin names the vocabulary in errors. */
void trainer_open_data(Trainer *t, const char *vocab_origin);
/* Labelled positions per batch, train.batch_size * data.max_predictions_per_seq; fatal (naming
 * both keys) if the product does not fit the int of the activation layout. */
int trainer_max_predictions(const Config *cfg);
/* Train until train.max_steps or SIGINT/SIGTERM/SIGUSR1 on any rank (then one save and every rank
 * stops) in train.run_dir, which rank 0 alone writes; metrics files are appended to when
 * `resumed`. Returns the exit status. */
int pretrain_run(Trainer *t, int resumed);
void trainer_free(Trainer *t);
