/* MLM pretraining: the training loop behind `realpos pretrain` and held-out evaluation behind
 * `realpos eval` (the commands are train/cli/cmd_pretrain.c). */
#pragma once
#include <hdf5.h>

#include "train/config/config.h"
#include "optim/adamw.h"
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
    AdamW opt;
    Activations acts;
    long step; /* updates completed */
    MetricsLog log;
    GradientReduce reduce; /* data-parallel hook of the step (step.h); zero: one process */
} Trainer;

typedef struct {
    double loss, accuracy, perplexity;
    double unigram_accuracy; /* baseline: always predict the most frequent training token */
    long predictions;
} EvalResult;

/* Held-out MLM loss/accuracy/perplexity over `num_batches` batches of a rewound eval stream;
 * unigram_token is the baseline's prediction (see shard_most_frequent_token). */
EvalResult evaluate_mlm(const Model *m, Activations *acts, InstanceStream *eval_stream,
                        InstanceBatch *batch, int num_batches, int unigram_token);


/* From t->cfg (and t->config_ini): the model and optimizer, weights from `resume` (model, optimizer,
 * step, data-stream state), `init` (weights only) or a fresh init, the vocabulary, the data
 * streams and the activations. config_path names the config in errors. */
void pretrain_setup(Trainer *t, const char *config_path, const char *resume, const char *init);
/* Tokenizer, train/eval shards and streams, batch and unigram token for t->vocab_text;
 * vocab_origin names the vocabulary in errors. */
void trainer_open_data(Trainer *t, const char *vocab_origin);
/* Labelled positions per batch, train.batch_size * data.max_predictions_per_seq; fatal (naming
 * both keys) if the product does not fit the int of the activation layout. */
int trainer_max_predictions(const Config *cfg);
/* Train until train.max_steps or SIGINT/SIGTERM (then save and stop) in train.run_dir; metrics
 * files are appended to when `resumed`. Returns the exit status. */
int pretrain_run(Trainer *t, int resumed);
void trainer_free(Trainer *t);
