/* MLM pretraining as a task of the run (run.h), and held-out MLM evaluation (also behind
 * `realpos eval`). The commands are train/cli/cmd_pretrain.c. */
#pragma once
#include "optim/dist.h"
#include "train/config/config.h"
#include "train/data/shard.h"
#include "train/data/instances.h"
#include "train/data/tokenizer.h"
#include "train/loop/run.h"
#include "train/model/batch_layout.h"
#include "train/model/model.h"

/* The data of MLM pretraining: vocabulary, train/eval shards and instance streams, one batch. */
typedef struct {
    char *vocab_text;
    Tokenizer *tok;
    Shard *train_shard, *eval_shard;
    InstanceStream *train_stream, *eval_stream;
    InstanceBatch *batch;  /* padded to data.max_seq_len, as the streams fill it */
    BatchLayout layout;    /* the batch in data.padding's layout (batch_layout.h) */
    PaddingKind padding;
    int unigram_token; /* most frequent training token: the baseline prediction */
} MlmData;

/* Tokenizer, shards, streams and batch of cfg's [data] for vocab_text (taken over: freed by
 * mlm_data_free); vocab_origin names the vocabulary in errors. */
void mlm_data_open(MlmData *d, const Config *cfg, char *vocab_text, const char *vocab_origin);
void mlm_data_free(MlmData *d);
/* The training stream's next batch in data.padding's layout (pointing into d's buffers). */
Batch mlm_data_next(MlmData *d);
/* Labelled positions per batch, train.batch_size * data.max_predictions_per_seq; fatal (naming
 * both keys) if the product does not fit the int of the activation layout. */
int mlm_max_predictions(const Config *cfg);

typedef struct {
    double loss, accuracy, perplexity;
    double unigram_accuracy; /* baseline: always predict the most frequent training token */
    long predictions;
    int stopped; /* a stop signal reached some rank and cut the evaluation short */
} EvalResult;

/* Held-out MLM loss/accuracy/perplexity over `num_batches` batches of the rewound eval stream.
 * With dist (may be NULL), batch i is evaluated by rank i mod N and the sums are added over
 * ranks. A stop signal ends it early. */
EvalResult evaluate_mlm(const Model *m, Activations *acts, MlmData *data, int num_batches, Dist *dist);

/* `realpos pretrain`: train cfg's model on its corpus shards in train.run_dir, from a fresh init,
 * from init's weights (--init: every parameter of the model's table, by name and shape), or
 * continuing start->resume. Returns the exit status. */
int pretrain(const Config *cfg, const char *config_ini, const char *config_path, Dist *dist, const RunStart *start,
             const char *init);
