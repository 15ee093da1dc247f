/* train/loop/: training runs. run.h: the one run object (directory, model, optimizer, step,
 * checkpoints, resume, stop, eval schedule, metrics) that pretraining (pretrain.h) and fine-tuning
 * (finetune.h) are two tasks of; step.h: the training step it runs; run_dir.h: what a run keeps in
 * its directory and the stop signals; metrics.h: the metrics files and progress line.
 *
 * One training step, over N data-parallel ranks (N = 1: one process, every collective a no-op):
 *   grads = 0
 *   for micro in 0..accum:  if micro is this rank's ([accum r / N, accum (r+1) / N)):
 *                               batch = source.next(step, micro)
 *                               loss = loss_forward(batch)      (dropout key: seed, step, micro)
 *                               loss_backward(loss / accum)     (grads +=)
 *                           else source.skip(step, micro)       (the stream advances alike)
 *   totals, stop flag: summed over ranks (dist_sum_doubles)
 *   grads: summed over ranks, clipped to clip_grad_norm (dp_adamw_reduce)
 *   lr = schedule(step); AdamW update (dp_adamw_update: whole moments, or this rank's ZeRO-1 shard)
 * A non-finite loss or gradient norm stops the program without saving. The step also keeps the
 * metrics window (loss, accuracy, tokens/s, MFU, ETA since the last log record) and writes a
 * record every log_interval steps and at the last step (a progress line in between).
 *
 * Every rank sees every micro-batch of the step in order (next or skip), so the data streams of
 * all ranks stay in the same state and a checkpoint resumes at any N. Backward is scaled by
 * 1/accum each micro-batch, so the rank sum is the step's mean; the global batch is batch_size x
 * accum at any N, and a micro-batch's dropout key is (seed, step, micro) at any N, so N ranks
 * compute what one process computes, summed in another order (docs/distributed.md). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/config/config_schema.h"
#include "train/loop/peak.h"
#include "optim/dp_adamw.h"
#include "train/loop/metrics.h"
#include "train/model/loss.h"

/* Where micro-batches come from: next() fills micro-batch `micro` of update `step` (0-based) with
 * pointers to buffers it owns; skip() advances past another rank's micro-batch exactly as next()
 * would, without building it (NULL: next() is called and its batch ignored). */
typedef struct {
    void (*next)(void *ctx, long step, int micro, TrainBatch *out);
    void (*skip)(void *ctx, long step, int micro);
    void *ctx;
} BatchSource;

/* The same batch *tb (which must outlive the source) for every micro-batch: bench's synthetic
 * batch, dump --train-steps' batch file. */
BatchSource batch_source_repeat(const TrainBatch *tb);

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

/* Seconds spent in each phase of the steps since train_step_init (this process). */
typedef struct {
    double forward, backward, update; /* update: gradient reduction, clipping, AdamW */
} StepPhases;

typedef struct {
    StepConfig cfg;
    Model *model;
    DpAdamW opt; /* the step's optimizer: the update over opt.dist's ranks */
    const OptimConfig *optim;
    LossHead head;
    BatchSource source;
    MetricsLog *log;   /* NULL: no records (ranks other than 0) */
    PeakEstimate peak; /* MFU's denominator, of one rank (train/loop/peak.h): the fp32 sgemm peak, or in a
                        * bf16 run the bf16 one, probed on peak_bf16's products */
    PeakBf16Probe peak_bf16;
    int stop;          /* after a step: a stop signal reached this process (with dp: any rank) */
    double comm_seconds, step_seconds; /* time in dp's communication, and in steps, since init */
    StepPhases phases;
    /* the last step's mean loss (over the job), gradient norm before clipping, learning rate */
    double last_loss, last_grad_norm;
    float last_lr;
    /* metrics window since the last record; its time counts only steps, not eval or saving */
    double t_begin, window_seconds, window_loss, window_flops;
    long window_start, window_tokens, window_correct, window_predictions;
} TrainStep;

/* What a checkpoint keeps of the metrics (/train/metrics_window, float64 [STEP_WINDOW_WORDS], in
 * this order): the run's elapsed seconds, and the open window's first step and partial sums, so a
 * resumed run's elapsed_s continues and its first record covers the whole window it names (the
 * loss, accuracy, lr and gradient norm of an uninterrupted run; tokens/s and MFU over the steps'
 * time of both processes). */
#define STEP_WINDOW_WORDS 8
typedef struct {
    double elapsed_s, seconds, loss, flops;
    long start, tokens, correct, predictions;
} StepWindow;
StepWindow train_step_window(const TrainStep *ts);
void train_step_resume_window(TrainStep *ts, const StepWindow *w);
void step_window_pack(const StepWindow *w, double words[STEP_WINDOW_WORDS]);
StepWindow step_window_unpack(const double words[STEP_WINDOW_WORDS]);

/* The one set-up of a training step, for every command that trains (pretraining and fine-tuning
 * through the run, bench, dump --train-steps): the model with its loss head (whose activations
 * own the precision: in bf16 their weights' copy is what AdamW's update pass refreshes), the
 * batch source, and the optimizer, data-parallel AdamW over dist's ranks (ZeRO-1 with
 * shard_optimizer) with fresh moments (a resume loads them into ts->opt). */
void train_step_init(TrainStep *ts, const StepConfig *cfg, Model *model, LossHead head, BatchSource source,
                     const OptimConfig *optim, Dist *dist, int shard_optimizer);
/* Start the clock, MFU's peak (probes) and the metrics window for a run whose next update is
 * first_step (0, or the resumed step); log NULL: no records (ranks other than 0). Before train_step. */
void train_step_begin(TrainStep *ts, MetricsLog *log, long first_step);
void train_step_free(TrainStep *ts);
/* Run update `step` (0-based: the number of updates done before it), then log. */
void train_step(TrainStep *ts, long step);
/* Over several ranks: log rank 0's communication time per step and its share of the time
 * spent in `steps` steps. */
void train_step_log_communication(const TrainStep *ts, long steps);
