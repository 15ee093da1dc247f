/* Fine-tuning as a task of the run (finetune.h).
 *
 * A step is train.grad_accum_steps micro-batches of B sequences each from the TaskSampler
 * (train/tasks/task_sampler.h: a fresh permutation each epoch, optionally grouped by length), each
 * padded to its longest sequence (task.padding), run by train_step (step.h): AdamW with [optim]'s
 * betas, eps and weight decay, peak task.lr, linear warmup over warmup_proportion of the steps then
 * linear decay to 0, clipping at train.clip_grad_norm, dropout keyed by (task.seed, step, micro).
 * Every train.checkpoint_interval steps, on a stop signal and after the last step a checkpoint
 * RUN_DIR/ckpt-NNNNNNN.h5 holds the model, the optimizer moments, /vocab and
 *   /train/step            int64 [1]      updates done
 *   /train/sampler_order   int32 [count]  the epoch's order of the training sequences
 *   /train/sampler_state   uint64 [5]     position in it, then the Rng's 4 state words
 *   /train/best_metric     float64        best dev metric so far (NaN: none)
 *   /train/best_step       int64 [1]      its step (-1: none)
 *   /train/stop_state      int64 [3]      the early stop (task.stop_accuracy): evaluations in a row
 *                                         at the threshold, the first step of that run (-1: none),
 *                                         the step the run stopped at (-1: it has not)
 * so `--resume` continues bit-identically to an uninterrupted run (same thread count). Every
 * task.eval_every steps (0: only at the end) the dev set is scored; the best model by the task's
 * metric (TaskScore) is RUN_DIR/best.h5. With task.stop_accuracy > 0 (tagging) the run ends after
 * the evaluation that makes task.stop_patience in a row with the token accuracy within the
 * training lengths at or above it (metrics.jsonl: an "early_stop" record with learned_step, the
 * first of them). At the end: RUN_DIR/model.h5 (same schema, task head included, /vocab) from
 * which `predict` reproduces the dev predictions, which are written too, then task.test_file is
 * scored once (a "task_test" record): the test file never steers the run. */
#include "train/loop/finetune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/io/crc32.h"
#include "core/io/h5io.h"
#include "train/model/checkpoint.h"

/* The fine-tuning task: the task runner, its training batches and best dev score. */
typedef struct {
    TaskRunner *r;
    FinetuneBatches batches;
    TaskData *dev, *test;
    double best; /* best dev metric so far, NaN: none */
    long best_step;
    /* the early stop: evaluations in a row at task.stop_accuracy, the step of the first of them
     * (-1: none), the step the run stopped at (-1: it goes on) */
    long streak, learned_step, stopped_step;
} FineTuning;

void finetune_batches_create(FinetuneBatches *fb, TaskRunner *r, const TaskFeatures *train_set) {
    fb->r = r;
    fb->train_set = train_set;
    task_sampler_create(&fb->sampler, train_set, (uint64_t)r->cfg.task.seed, r->B, r->cfg.task.group_by_length);
}

void finetune_batches_free(FinetuneBatches *fb) { task_sampler_free(&fb->sampler); }

/* BatchSource: the next B sequences of the epoch's permutation. */
static void next_task_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    FinetuneBatches *fb = ctx;
    TaskRunner *r = fb->r;
    task_sampler_next(&fb->sampler, r->rows);
    task_fill_batch(r, fb->train_set, r->rows); /* r->batch: [B, its longest sequence] */
    long tokens = 0;
    for (int n = 0; n < r->batch.B * r->batch.L; n++)
        tokens += r->attention_mask[n];
    *out = (TrainBatch){r->batch, {r->labels, r->values, r->start, r->end, r->token_labels}, tokens};
}

/* Another rank's micro-batch: the sampler moves on, nothing is built. */
static void skip_task_batch(void *ctx, long step, int micro) {
    (void)step, (void)micro;
    FinetuneBatches *fb = ctx;
    task_sampler_next(&fb->sampler, fb->r->rows);
}

BatchSource finetune_batch_source(FinetuneBatches *fb) { return (BatchSource){next_task_batch, skip_task_batch, fb}; }

LossHead finetune_loss_head(TaskRunner *r) {
    int regression = r->layout.type == TASK_REGRESSION && r->cfg.task.type != TASK_SQUAD;
    return loss_head_task(&r->model, &r->acts, &r->heads, regression);
}

static void write_vocab(hid_t file, const void *ctx) {
    const TaskRunner *r = ctx;
    checkpoint_write_vocab(file, r->vocab_text, r->cfg.data.do_lower_case);
}

static void write_state(hid_t file, const void *ctx) {
    const FineTuning *ft = ctx;
    write_vocab(file, ft->r);
    hsize_t one = 1;
    task_sampler_save(&ft->batches.sampler, file);
    int64_t best_step = ft->best_step;
    h5_write_double(file, "train/best_metric", ft->best);
    h5_write_int64s(file, "train/best_step", &best_step, 1, &one);
    int64_t stop_state[3] = {ft->streak, ft->learned_step, ft->stopped_step};
    hsize_t three = 3;
    h5_write_int64s(file, "train/stop_state", stop_state, 1, &three);
}

/* Sampler and best score of a fine-tuning checkpoint. */
static void read_state(void *ctx, hid_t f, const char *ckpt) {
    FineTuning *ft = ctx;
    hsize_t one = 1, count = (hsize_t)ft->batches.sampler.count;
    hsize_t dims[4];
    int rank = h5_shape(f, ckpt, "train/sampler_order", dims);
    RP_CHECK(rank == 1 && dims[0] == count, "%s: the checkpoint's sampler covers %llu training sequences, %s has "
             "%d: key 'task.train_file' (or its content, or the keys that shape sequences) changed; a resumed run "
             "continues the same data", ckpt, rank == 1 ? (unsigned long long)dims[0] : 0ull, ft->r->cfg.task.train_file,
             ft->batches.sampler.count);
    task_sampler_load(&ft->batches.sampler, f, ckpt);
    int64_t best_step;
    ft->best = h5_read_double(f, ckpt, "train/best_metric");
    h5_read_int64s(f, ckpt, "train/best_step", &best_step, 1, &one);
    ft->best_step = (long)best_step;
    if (h5_exists(f, "train/stop_state")) { /* absent from checkpoints older than the early stop */
        int64_t stop_state[3];
        hsize_t three = 3;
        h5_read_int64s(f, ckpt, "train/stop_state", stop_state, 1, &three);
        ft->streak = (long)stop_state[0];
        ft->learned_step = (long)stop_state[1];
        ft->stopped_step = (long)stop_state[2];
    }
}

/* The early stop after a dev evaluation during training (rank 0): `within` is the dev token
 * accuracy within the training lengths; stop_patience evaluations in a row at stop_accuracy or
 * above stop the run, learned at the first of them. */
static void early_stop_update(FineTuning *ft, Run *run, double within) {
    const TaskConfig *task = &ft->r->cfg.task;
    if (task->stop_accuracy <= 0 || isnan(within) || ft->stopped_step >= 0)
        return;
    if (within < task->stop_accuracy) {
        ft->streak = 0;
        ft->learned_step = -1;
        return;
    }
    if (ft->streak++ == 0)
        ft->learned_step = run->step;
    if (ft->streak < task->stop_patience)
        return;
    ft->stopped_step = run->step;
    fprintf(run->log.jsonl, "{\"kind\":\"early_stop\",\"step\":%ld,\"learned_step\":%ld,\"threshold\":%.9g,"
            "\"patience\":%d}\n", run->step, ft->learned_step, (double)task->stop_accuracy, task->stop_patience);
    fflush(run->log.jsonl);
    rp_log("dev token accuracy within the training lengths >= %g at %d evaluations in a row since step %ld: "
           "stopping at step %ld (task.stop_accuracy, task.stop_patience)", (double)task->stop_accuracy,
           task->stop_patience, ft->learned_step, run->step);
}

static long goal_step(const void *ctx) { return ((const FineTuning *)ctx)->stopped_step; }

/* The identity of task.train_file that every rank must share: its size and CRC-32 (one read). */
static void train_file_identity(const char *path, char *out, size_t size) {
    FILE *f = fopen(path, "rb");
    RP_CHECK(f, "%s (key 'task.train_file'): cannot open: %s", path, strerror(errno));
    Crc32Tables *tables = xmalloc(sizeof *tables);
    crc32_tables_init(tables);
    size_t chunk = 1 << 20, got;
    char *buf = xmalloc(chunk);
    uint32_t crc = 0;
    long long bytes = 0;
    while ((got = fread(buf, 1, chunk, f)) > 0) {
        crc = crc32_update(tables, crc, buf, got);
        bytes += (long long)got;
    }
    RP_CHECK(!ferror(f), "%s (key 'task.train_file'): cannot read: %s", path, strerror(errno));
    fclose(f);
    free(buf);
    free(tables);
    snprintf(out, size, "task.train_file %s: %lld bytes, CRC-32 %08x", path, bytes, (unsigned)crc);
}

/* Score the dev set (rank 0); keep RUN_DIR/best.h5 when the task's metric improves (and
 * eval_every > 0: with only the final evaluation best.h5 would be model.h5). The final scoring
 * also writes the dev predictions. */
static void evaluate(void *ctx, Run *run, int final) {
    FineTuning *ft = ctx;
    TaskRunner *r = ft->r;
    if (!ft->dev || !dist_is_root(run->dist))
        return;
    char predictions[CONFIG_PATH_MAX + 64];
    snprintf(predictions, sizeof predictions, "%s/%s", run->dir.path,
             r->cfg.task.type == TASK_SQUAD ? "predictions.json" : "dev_predictions.tsv");
    r->interim_eval = !final;
    TaskScore score = task_predict(r, ft->dev, final ? predictions : NULL, run->log.jsonl, run->step);
    r->interim_eval = 0;
    if (!final)
        early_stop_update(ft, run, score.within);
    if (score.name && !isnan(score.value) && (isnan(ft->best) || score.value > ft->best)) {
        ft->best = score.value;
        ft->best_step = run->step;
        fprintf(run->log.jsonl, "{\"kind\":\"best\",\"step\":%ld,\"metric\":\"%s\",\"value\":%.17g}\n",
                run->step, score.name, score.value);
        fflush(run->log.jsonl);
        if (r->cfg.task.eval_every > 0) {
            run_save_weights(run, "best.h5", write_vocab, r);
            rp_log("dev %s %.4f at step %ld: the best so far, saved %s/best.h5", score.name, score.value, run->step,
                   run->dir.path);
        }
    }
    if (final && r->cfg.task.eval_every > 0 && !isnan(ft->best))
        rp_log("best dev score %.4f at step %ld: %s/best.h5", ft->best, ft->best_step, run->dir.path);
}

/* RUN_DIR/model.h5: the fine-tuned weights with /vocab, from which `predict` reproduces the dev
 * predictions (rank 0). */
static void finish(void *ctx, Run *run) {
    FineTuning *ft = ctx;
    if (!dist_is_root(run->dist))
        return;
    run_save_weights(run, "model.h5", write_vocab, ft->r);
    rp_log("fine-tuned checkpoint %s/model.h5", run->dir.path);
    if (ft->test) { /* once, with the final weights */
        char predictions[CONFIG_PATH_MAX + 64];
        snprintf(predictions, sizeof predictions, "%s/test_predictions.%s", run->dir.path,
                 ft->r->cfg.task.type == TASK_SQUAD ? "json" : "tsv");
        ft->r->record_kind = "task_test";
        task_predict(ft->r, ft->test, predictions, run->log.jsonl, run->step);
        ft->r->record_kind = NULL;
        fflush(run->log.jsonl);
    }
}

long finetune_steps(const Config *cfg, int sequences, int *warmup, long *epoch_steps) {
    const TaskConfig *task = &cfg->task;
    long total = (long)ceil((double)task->epochs * sequences / ((double)task->batch_size * cfg->train.grad_accum_steps));
    if (epoch_steps)
        *epoch_steps = total;
    if (task->max_steps > 0 && task->max_steps < total)
        total = task->max_steps;
    *warmup = (int)(task->warmup_proportion * (double)total);
    return total;
}

int finetune(Run *run, const char *config_ini, TaskRunner *r, const TaskData *train_data, TaskData *dev_data,
             TaskData *test_data) {
    const TaskConfig *task = &r->cfg.task;
    const TrainConfig *tc = &r->cfg.train;
    const TaskFeatures *train_set = &train_data->features;
    int B = r->B, accum = tc->grad_accum_steps;
    FineTuning ft = {r, .dev = dev_data, .test = test_data, .best = NAN, .best_step = -1, .learned_step = -1,
                     .stopped_step = -1};
    int warmup;
    long epoch_steps, total = finetune_steps(&r->cfg, train_set->count, &warmup, &epoch_steps);
    finetune_batches_create(&ft.batches, r, train_set);
    r->should_stop = stop_signal_received; /* a dev evaluation stops early too */
    char data_identity[CONFIG_PATH_MAX + 128];
    train_file_identity(task->train_file, data_identity, sizeof data_identity);
    /* Which bound ends the run: the steps of task.epochs, or task.max_steps (> 0) if fewer. */
    if (total < epoch_steps) /* the cap, and how much of the data it covers */
        rp_log("fine-tuning: %d sequences: %.3g epochs would be %ld steps, capped by task.max_steps at %ld "
               "steps (%.3g epochs) of %d x %d (warmup %d): task.max_steps ends the run", train_set->count,
               (double)task->epochs, epoch_steps, total, (double)total * B * accum / train_set->count, accum, B,
               warmup);
    else if (task->max_steps == total)
        rp_log("fine-tuning: %d sequences, %.3g epochs = %ld steps of %d x %d (warmup %d): task.epochs and "
               "task.max_steps end the run at the same step", train_set->count, (double)task->epochs, total, accum,
               B, warmup);
    else
        rp_log("fine-tuning: %d sequences, %.3g epochs = %ld steps of %d x %d (warmup %d): task.epochs%s ends the "
               "run%s", train_set->count, (double)task->epochs, total, accum, B, warmup,
               config_key_is_set(&r->cfg, "task", "epochs") ? "" : " (its default)",
               task->max_steps > 0 ? "" : " (task.max_steps = 0: no cap)");
    if (task->max_steps > total) { /* set, and never reached */
        double epochs_needed = (double)task->max_steps * B * accum / train_set->count;
        if (config_key_is_set(&r->cfg, "task", "epochs"))
            rp_log("note: task.epochs = %.3g and task.max_steps = %d are both set: task.epochs ends the run first, "
                   "after %ld steps; task.max_steps is never reached (%d steps would be %.4g epochs)",
                   (double)task->epochs, task->max_steps, total, task->max_steps, epochs_needed);
        else
            rp_log("note: task.max_steps = %d is never reached: task.epochs = %.3g (the default) ends the run first, "
                   "after %ld steps (%d steps would be %.4g epochs: set task.epochs)", task->max_steps,
                   (double)task->epochs, total, task->max_steps, epochs_needed);
    }
    RunTask rt = {
        .name = "fine-tuning",
        .source = finetune_batch_source(&ft.batches),
        .head = finetune_loss_head(r),
        .schedule = {SCHED_LINEAR, task->lr, warmup, total, accum, tc->clip_grad_norm, (uint64_t)task->seed,
                     tc->log_interval, NULL},
        .eval_interval = dev_data ? task->eval_every : 0,
        .save_final = 1, /* a finished run resumes to "nothing to do" */
        .data_identity = data_identity,
        .ctx = &ft,
        .evaluate = evaluate,
        .write_state = write_state,
        .read_state = read_state,
        .finish = finish,
        .goal_step = goal_step,
    };
    int rc = run_train(run, config_ini, &r->model, &rt);
    finetune_batches_free(&ft.batches);
    return rc;
}
