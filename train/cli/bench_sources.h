/* The batch sources `realpos bench` times (cmd_bench.c): a synthetic batch of full rows, fine-tuning's
 * own batches of a task file (--lengths-from), and pretraining's own batches of the config's shards
 * (--from-shards), each behind a BatchSource; CountedSource counts what the timed micro-batches hold. */
#pragma once

#include "train/config/config.h"
#include "train/loop/finetune.h"
#include "train/loop/pretrain.h"
#include "train/loop/step.h"
#include "train/model/model.h"

/* The synthetic source's model and its one batch [B, L]. */
typedef struct {
    Model model;
    Activations acts;
    int *ids, *types, *mask, *labels;
    int labelled; /* positions with an MLM label */
    TrainBatch batch;
} SyntheticBench;

/* The fine-tuning source: the task's runner (model, head, batch buffers), its data and batches. */
typedef struct {
    TaskRunner r;
    TaskData data;
    FinetuneBatches batches;
    double mean_length; /* tokens per sequence of FILE, [CLS] and [SEP]s included */
} TaskBench;

/* Around the source: what the timed micro-batches hold (reset before the first timed step). The
 * step loop never allocates: lengths has room for every micro-batch of the run. */
typedef struct {
    BatchSource inner;
    long real_tokens, computed_tokens; /* attention_mask = 1 positions; the rows computed (B x padded
                                        * length, or the real tokens of an unpadded batch) */
    int *lengths;                      /* [capacity] padded length of each micro-batch since the reset */
    int count, capacity;
    const ModelConfig *model;          /* for flops: model_flops_of_batch of each micro-batch, the MLM */
    int mlm;                           /* decoder's products counted with mlm (its labels) */
    double flops;
} CountedSource;

/* Random batch: full-length sequences, a fixed fraction of positions labelled. */
void synthetic_create(SyntheticBench *s, const Config *cfg, int B, int L, double label_frac);
void synthetic_free(SyntheticBench *s);
/* FILE read as the task's training data, batched as fine-tuning batches it. */
void task_bench_create(TaskBench *t, const Config *cfg, const char *path);
void task_bench_free(TaskBench *t);

/* Pretraining's batches: the training stream of cfg's [data] shards in data.padding's layout, MLM
 * loss on a model initialised from model.seed. */
typedef struct {
    MlmData data;
    Model model;
    Activations acts;
} ShardBench;
void shard_bench_create(ShardBench *s, const Config *cfg);
void shard_bench_free(ShardBench *s);
BatchSource shard_bench_source(ShardBench *s);

/* BatchSource around c->inner that counts (ctx: the CountedSource) */
void next_counted(void *ctx, long step, int micro, TrainBatch *out);
