/* The fine-tuning loop (finetune.h).
 *
 * A step is one batch of B sequences from the TaskSampler (train/tasks/task_sampler.h: a fresh
 * permutation each epoch, optionally grouped by length), padded to its longest sequence
 * (task.padding), run by the shared train_step (step.h):
 * AdamW with [optim]'s betas, eps and weight decay, peak task.lr, linear warmup over
 * warmup_proportion of the steps then linear decay to 0, clipping at train.clip_grad_norm, dropout
 * keyed by (task.seed, step). Every train.checkpoint_interval steps and on SIGINT/SIGTERM a
 * checkpoint RUN_DIR/ckpt-NNNNNNN.h5 holds the model, the optimizer moments, /vocab and
 *   /train/step            int64 [1]      updates done
 *   /train/sampler_order   int32 [count]  the epoch's order of the training sequences
 *   /train/sampler_state   uint64 [5]     position in it, then the Rng's 4 state words
 *   /train/best_metric     float64        best dev metric so far (NaN: none)
 *   /train/best_step       int64 [1]      its step (-1: none)
 * so `--resume` continues bit-identically to an uninterrupted run (same thread count). Every
 * task.eval_every steps (0: only at the end) the dev set is scored; the best model by the task's
 * metric (TaskScore) is RUN_DIR/best.h5. At the end: RUN_DIR/model.h5 (same schema, task head
 * included, /vocab) from which `predict` reproduces the dev predictions, which are written too. */
#include "train/loop/finetune.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/h5io.h"
#include "train/loop/metrics.h"
#include "train/loop/run_dir.h"
#include "train/loop/step.h"
#include "train/model/checkpoint.h"
#include "train/tasks/task_sampler.h"

/* A fine-tuning run: the task runner, its data, optimizer, sampler, step and best dev score. */
typedef struct {
    TaskRunner *r;
    const TaskFeatures *train_set;
    TaskData *dev;
    const char *config_ini;
    Dist *dist;
    DpAdamW opt; /* whole moments, or this rank's ZeRO-1 shard (train.shard_optimizer) */
    TaskSampler sampler;
    long step, total;
    MetricsLog log;
    double best; /* best dev metric so far, NaN: none */
    long best_step;
} FineTuner;

/* BatchSource of fine-tuning: the next B sequences of the epoch's permutation. */
static void next_task_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    FineTuner *ft = ctx;
    TaskRunner *r = ft->r;
    task_sampler_next(&ft->sampler, r->rows);
    task_fill_batch(r, ft->train_set, r->rows); /* r->batch: [B, its longest sequence] */
    long tokens = 0;
    for (int n = 0; n < r->batch.B * r->batch.L; n++)
        tokens += r->attention_mask[n];
    *out = (TrainBatch){r->batch, {r->labels, r->values, r->start, r->end}, tokens};
}

static void write_vocab(hid_t file, const void *ctx) {
    const TaskRunner *r = ctx;
    checkpoint_write_vocab(file, r->vocab_text, r->cfg.data.do_lower_case);
}

static void write_training_state(hid_t file, const void *ctx) {
    const FineTuner *ft = ctx;
    write_vocab(file, ft->r);
    int64_t step = ft->step;
    hsize_t one = 1;
    h5_write_int64s(file, "train/step", &step, 1, &one);
    task_sampler_save(&ft->sampler, file);
    int64_t best_step = ft->best_step;
    h5_write_double(file, "train/best_metric", ft->best);
    h5_write_int64s(file, "train/best_step", &best_step, 1, &one);
}

/* Every rank calls (ZeRO-1 moments are gathered on rank 0 through the gradient block, free
 * between steps); rank 0 writes. */
static void save_checkpoint(FineTuner *ft) {
    const TrainConfig *tc = &ft->r->cfg.train;
    AdamW full = dp_adamw_full(&ft->opt, ft->r->model.grads);
    dp_adamw_gather(&ft->opt, &full);
    if (dist_is_root(ft->dist)) {
        CheckpointExtras extras = {ft->config_ini, &full, write_training_state, ft};
        run_dir_save_checkpoint(tc->run_dir, ft->step, tc->keep_last, &ft->r->model, &extras);
    }
    dp_adamw_release(&ft->opt);
}

/* Model, optimizer, step, sampler and best score of a fine-tuning checkpoint. */
static void resume_from(FineTuner *ft, const char *ckpt) {
    char *stored_ini;
    hid_t f = checkpoint_open(ckpt, &stored_ini);
    RP_CHECK(h5_exists(f, "train/sampler_order") && h5_exists(f, "optimizer"),
             "%s: not a fine-tuning checkpoint with optimizer state; --resume needs RUN_DIR/ckpt-NNNNNNN.h5 of a "
             "`realpos finetune` run", ckpt);
    checkpoint_load_model(f, ckpt, &ft->r->model);
    AdamW full = dp_adamw_full(&ft->opt, ft->r->model.grads); /* every rank reads, keeps its shard */
    RP_CHECK(checkpoint_load_optimizer(f, ckpt, &ft->r->model, &full), "%s: no optimizer state to resume from",
             ckpt);
    dp_adamw_scatter(&ft->opt, &full);
    dp_adamw_release(&ft->opt);
    int64_t step;
    hsize_t one = 1;
    h5_read_int64s(f, ckpt, "train/step", &step, 1, &one);
    RP_CHECK(step >= 0 && step <= ft->total, "%s: dataset /train/step: expected 0..%ld (the run's steps), got %lld",
             ckpt, ft->total, (long long)step);
    task_sampler_load(&ft->sampler, f, ckpt);
    int64_t best_step;
    ft->best = h5_read_double(f, ckpt, "train/best_metric");
    h5_read_int64s(f, ckpt, "train/best_step", &best_step, 1, &one);
    ft->best_step = (long)best_step;
    ft->step = (long)step;
    h5_close(f, ckpt);
    free(stored_ini);
    rp_log("resumed from %s at step %ld", ckpt, ft->step);
}

/* Score the dev set at `step`; keep RUN_DIR/best.h5 when the task's metric improves (and
 * eval_every > 0: with only the final evaluation best.h5 would be model.h5). */
static void evaluate_dev(FineTuner *ft, const char *predictions_path) {
    TaskRunner *r = ft->r;
    TaskScore score = task_predict(r, ft->dev, predictions_path, ft->log.jsonl, ft->step);
    if (!score.name || isnan(score.value) || (!isnan(ft->best) && score.value <= ft->best))
        return;
    ft->best = score.value;
    ft->best_step = ft->step;
    fprintf(ft->log.jsonl, "{\"kind\":\"best\",\"step\":%ld,\"metric\":\"%s\",\"value\":%.17g}\n", ft->step,
            score.name, score.value);
    fflush(ft->log.jsonl);
    if (r->cfg.task.eval_every == 0)
        return;
    char path[CONFIG_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/best.h5", r->cfg.train.run_dir);
    CheckpointExtras extras = {ft->config_ini, NULL, write_vocab, r};
    checkpoint_save(path, &r->model, &extras);
    rp_log("dev %s %.4f at step %ld: the best so far, saved %s", score.name, score.value, ft->step, path);
}

void finetune_run(TaskRunner *r, const TaskData *train_data, TaskData *dev_data, const FinetuneOptions *opt) {
    const char *config_ini = opt->config_ini, *resume = opt->resume;
    const TaskConfig *task = &r->cfg.task;
    const TrainConfig *tc = &r->cfg.train;
    const TaskFeatures *train_set = &train_data->features;
    int B = r->B, regression = r->layout.type == TASK_REGRESSION && task->type != TASK_SQUAD;
    FineTuner ft = {r, train_set, dev_data, config_ini, opt->dist, .best = NAN, .best_step = -1};
    int accum = tc->grad_accum_steps, root = dist_is_root(opt->dist);
    ft.total = (long)ceil((double)task->epochs * train_set->count / ((double)B * accum));
    if (task->max_steps > 0 && task->max_steps < ft.total)
        ft.total = task->max_steps;
    int warmup = (int)(task->warmup_proportion * (double)ft.total);
    dp_adamw_create(&ft.opt, opt->dist, &r->model.table, tc->shard_optimizer);
    task_sampler_create(&ft.sampler, train_set, (uint64_t)task->seed, B, task->group_by_length);
    if (resume)
        resume_from(&ft, resume);
    dist_broadcast(opt->dist, r->model.params, r->model.table.block_floats); /* rank 0's bits everywhere */

    if (root) { /* rank 0 alone writes the run directory and scores the dev set */
        run_dir_open(tc->run_dir, config_ini);
        metrics_open(&ft.log, tc->run_dir, resume != NULL);
    }
    stop_signals_install();
    r->should_stop = stop_signal_received; /* a dev evaluation stops early too */
    StepConfig sc = {SCHED_LINEAR, task->lr, warmup, ft.total, accum, tc->clip_grad_norm, (uint64_t)task->seed,
                     tc->log_interval, tc->run_dir};
    TrainStep ts;
    train_step_init(&ts, &sc, &r->model, NULL, &r->cfg.optim,
                    loss_head_task(&r->model, &r->acts, &r->heads, regression), (BatchSource){next_task_batch, &ft},
                    root ? &ft.log : NULL, ft.step);
    ts.dp = &ft.opt;
    rp_log("fine-tuning: %d sequences, %.3g epochs = %ld steps of %d x %d (warmup %d), %d rank%s x %d threads",
           train_set->count, (double)task->epochs, ft.total, accum, B, warmup, opt->dist->size,
           opt->dist->size > 1 ? "s" : "", omp_get_max_threads());
    long first_step = ft.step;
    while (ft.step < ft.total && !ts.stop) {
        train_step(&ts, ft.step);
        ft.step++;
        if (root && dev_data && task->eval_every > 0 && ft.step % task->eval_every == 0 && ft.step < ft.total)
            evaluate_dev(&ft, NULL);
        if (ft.step % tc->checkpoint_interval == 0 && ft.step < ft.total && !ts.stop)
            save_checkpoint(&ft);
    }
    train_step_log_communication(&ts, ft.step - first_step);
    if (ts.stop) { /* a signal reached some rank: every rank leaves after the same step */
        if (stop_signal_received())
            rp_log("signal %d: saving a checkpoint at step %ld and stopping", stop_signal_received(), ft.step);
        else
            rp_log("a stop signal on another rank: saving a checkpoint at step %ld and stopping", ft.step);
        save_checkpoint(&ft);
    } else if (root) {
        char path[CONFIG_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/model.h5", tc->run_dir);
        CheckpointExtras extras = {config_ini, NULL, write_vocab, r};
        checkpoint_save(path, &r->model, &extras);
        rp_log("fine-tuned checkpoint %s", path);
        if (dev_data) {
            snprintf(path, sizeof path, "%s/%s", tc->run_dir,
                     task->type == TASK_SQUAD ? "predictions.json" : "dev_predictions.tsv");
            evaluate_dev(&ft, path);
            if (task->eval_every > 0 && !isnan(ft.best))
                rp_log("best dev score %.4f at step %ld: %s/best.h5", ft.best, ft.best_step, tc->run_dir);
        }
    }
    if (root)
        metrics_close(&ft.log);
    task_sampler_free(&ft.sampler);
    dp_adamw_free(&ft.opt);
}
