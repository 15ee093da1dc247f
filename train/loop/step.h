/* train/loop/: training runs. step.h: the one training step both loops run; pretrain.h: the MLM
 * pretraining loop and held-out evaluation; finetune.h: the fine-tuning loop; run_dir.h:
 * config.ini, rotating checkpoints, `latest` and the SIGINT/SIGTERM flag; metrics.h: the
 * metrics files and progress line.
 *
 * One training step, shared by pretraining and fine-tuning:
 *   grads = 0
 *   for micro in 0..accum:  batch = source.next(step, micro)
 *                           loss = loss_forward(batch)        (dropout key: seed, step, micro)
 *                           loss_backward(loss / accum)       (grads +=)
 *   reduce.fn(grads)        optional hook on this process's gradient block
 *   clip to clip_grad_norm, lr = schedule(step), AdamW update
 * A non-finite loss or gradient norm stops the program without saving. The step also keeps the
 * metrics window (loss, accuracy, tokens/s, MFU, ETA since the last log record) and writes a
 * record every log_interval steps and at the last step (a progress line in between).
 *
 * Data parallelism (dp set: optim/dp_adamw.h over core/dist.h): the accum micro-batches of a step
 * are shared by the N ranks, rank r computing micro-batches [accum r / N, accum (r+1) / N). Every
 * rank still asks the source for every micro-batch (so data streams advance alike on all ranks and
 * a checkpoint resumes at any N) but runs forward/backward on its own only. The gradient is summed
 * over ranks by dp_adamw_reduce (backward scaled each micro-batch by 1/accum: the sum is the
 * step's mean), the totals and the stop flag by dist_sum_doubles; clipping, learning rate, NaN
 * checks and metrics see the global values. The global batch is batch_size x accum at any N, and
 * a micro-batch's dropout key is (seed, step, micro) at any N, so N ranks compute what one
 * process computes, summed in another order (docs/distributed.md). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/config_schema.h"
#include "optim/adamw.h"
#include "optim/dp_adamw.h"
#include "train/loop/metrics.h"
#include "train/model/loss.h"

/* Where micro-batches come from: next() fills micro-batch `micro` of update `step` (0-based) with
 * pointers to buffers it owns. A data-parallel rank reads its own slice here. */
typedef struct {
    void (*next)(void *ctx, long step, int micro, TrainBatch *out);
    void *ctx;
} BatchSource;

/* Sums over one step's micro-batches (this process's), as the window accumulates them. */
typedef struct {
    double loss; /* sum of micro-batch losses / accum: the step's mean loss */
    long correct, predictions, tokens;
    double flops;
} StepTotals;

/* Called once per step after the last micro-batch's backward and before clipping, with this
 * process's gradient block (the sum over its micro-batches of d(loss / accum)) and its totals;
 * a data-parallel run averages both over ranks here. fn = NULL: one process. */
typedef struct {
    void (*fn)(void *ctx, float *grads, size_t count, StepTotals *totals);
    void *ctx;
} GradientReduce;

typedef struct {
    ScheduleKind schedule;
    float peak_lr;
    int warmup_steps;
    long total_steps;
    int grad_accum_steps;
    float clip_grad_norm;
    uint64_t dropout_seed; /* dropout key of a micro-batch: hash_key(seed, step, micro) */
    int log_interval;
    const char *run_dir; /* named in the NaN stop message when it holds a checkpoint; may be NULL */
} StepConfig;

typedef struct {
    StepConfig cfg;
    Model *model;
    AdamW *opt;   /* one process: the optimizer (unused when dp is set) */
    DpAdamW *dp;  /* set after train_step_init: data-parallel update over dp->dist's ranks */
    const OptimConfig *optim;
    LossHead head;
    BatchSource source;
    GradientReduce reduce;
    MetricsLog *log;   /* NULL: no records (ranks other than 0) */
    double peak_flops; /* sgemm peak, for MFU */
    int stop;          /* after a step: a stop signal reached this process (with dp: any rank) */
    double comm_seconds, step_seconds; /* time in dp's communication, and in steps, since init */
    /* metrics window since the last record; its time counts only steps, not eval or saving */
    double t_begin, window_seconds, window_loss, window_flops;
    long window_start, window_tokens, window_correct, window_predictions;
} TrainStep;

/* The step machinery for a run whose next update is first_step (0, or the resumed step). */
void train_step_init(TrainStep *ts, const StepConfig *cfg, Model *model, AdamW *opt, const OptimConfig *optim,
                     LossHead head, BatchSource source, MetricsLog *log, long first_step);
/* Run update `step` (0-based: the number of updates done before it), then log. */
void train_step(TrainStep *ts, long step);
/* With dp over several ranks: log rank 0's communication time per step and its share of the time
 * spent in `steps` steps. */
void train_step_log_communication(const TrainStep *ts, long steps);
