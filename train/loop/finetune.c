/* The fine-tuning loop (finetune.h).
 *
 * A step is one batch of B sequences drawn from a fresh permutation of the training sequences each
 * epoch (Fisher-Yates from an Rng seeded by task.seed), run by the run's train_step (run.h):
 * AdamW with [optim]'s betas, eps and weight decay, peak task.lr, linear warmup over
 * warmup_proportion of the steps then linear decay to 0, clipping at train.clip_grad_norm, dropout
 * keyed by (task.seed, step). Every train.checkpoint_interval steps and on a stop signal a
 * checkpoint RUN_DIR/ckpt-NNNNNNN.h5 holds the model, the optimizer moments, /vocab and
 *   /train/step            int64 [1]      updates done
 *   /train/sampler_order   int32 [count]  the epoch's permutation of the training sequences
 *   /train/sampler_state   uint64 [5]     position in it, then the Rng's 4 state words
 *   /train/best_metric     float64        best dev metric so far (NaN: none)
 *   /train/best_step       int64 [1]      its step (-1: none)
 * so `--resume` continues bit-identically to an uninterrupted run (same thread count). Every
 * task.eval_every steps (0: only at the end) the dev set is scored; the best model by the task's
 * metric (TaskScore) is RUN_DIR/best.h5. At the end: RUN_DIR/model.h5 (same schema, task head
 * included, /vocab) from which `predict` reproduces the dev predictions, which are written too. */
#include "train/loop/finetune.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/h5io.h"
#include "core/rng.h"
#include "train/model/checkpoint.h"

typedef struct {
    int *order; /* permutation of the training sequences */
    int count, next;
    Rng rng;
} Sampler;

static void sampler_next(Sampler *s, int *rows, int B) {
    for (int b = 0; b < B; b++) {
        if (s->next == 0)
            for (int i = s->count - 1; i > 0; i--) { /* Fisher-Yates at each epoch start */
                int j = (int)rng_below(&s->rng, (uint64_t)i + 1), t = s->order[i];
                s->order[i] = s->order[j];
                s->order[j] = t;
            }
        rows[b] = s->order[s->next];
        s->next = (s->next + 1) % s->count;
    }
}

/* The fine-tuning task: the task runner, its data, sampler and best dev score. */
typedef struct {
    TaskRunner *r;
    const TaskFeatures *train_set;
    TaskData *dev;
    Sampler sampler;
    double best; /* best dev metric so far, NaN: none */
    long best_step;
} FineTuning;

/* BatchSource: the next B sequences of the epoch's permutation. */
static void next_task_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    FineTuning *ft = ctx;
    TaskRunner *r = ft->r;
    sampler_next(&ft->sampler, r->rows, r->B);
    task_fill_batch(r, ft->train_set, r->rows);
    long tokens = 0;
    for (int n = 0; n < r->B * r->L; n++)
        tokens += r->attention_mask[n];
    *out = (TrainBatch){{r->B, r->L, r->input_ids, r->token_type_ids, r->attention_mask, NULL},
                        {r->labels, r->values, r->start, r->end}, tokens};
}

/* Another rank's micro-batch: the sampler moves on, nothing is built. */
static void skip_task_batch(void *ctx, long step, int micro) {
    (void)step, (void)micro;
    FineTuning *ft = ctx;
    sampler_next(&ft->sampler, ft->r->rows, ft->r->B);
}

static void write_vocab(hid_t file, const void *ctx) {
    const TaskRunner *r = ctx;
    checkpoint_write_vocab(file, r->vocab_text, r->cfg.data.do_lower_case);
}

static void write_state(hid_t file, const void *ctx) {
    const FineTuning *ft = ctx;
    write_vocab(file, ft->r);
    hsize_t one = 1, count = (hsize_t)ft->sampler.count;
    h5_write_ints(file, "train/sampler_order", ft->sampler.order, 1, &count);
    uint64_t state[5] = {(uint64_t)ft->sampler.next, ft->sampler.rng.s[0], ft->sampler.rng.s[1],
                         ft->sampler.rng.s[2], ft->sampler.rng.s[3]};
    h5_write_uint64s(file, "train/sampler_state", state, 5);
    int64_t best_step = ft->best_step;
    h5_write_double(file, "train/best_metric", ft->best);
    h5_write_int64s(file, "train/best_step", &best_step, 1, &one);
}

/* Sampler and best score of a fine-tuning checkpoint. */
static void read_state(void *ctx, hid_t f, const char *ckpt) {
    FineTuning *ft = ctx;
    hsize_t one = 1, count = (hsize_t)ft->sampler.count;
    hsize_t dims[4];
    int rank = h5_shape(f, ckpt, "train/sampler_order", dims);
    RP_CHECK(rank == 1 && dims[0] == count, "%s: the checkpoint's sampler covers %llu training sequences, %s has "
             "%d: key 'task.train_file' (or its content, or the keys that shape sequences) changed; a resumed run "
             "continues the same data", ckpt, rank == 1 ? (unsigned long long)dims[0] : 0ull, ft->r->cfg.task.train_file,
             ft->sampler.count);
    h5_read_ints(f, ckpt, "train/sampler_order", ft->sampler.order, 1, &count);
    for (int i = 0; i < ft->sampler.count; i++)
        RP_CHECK(ft->sampler.order[i] >= 0 && ft->sampler.order[i] < ft->sampler.count,
                 "%s: dataset /train/sampler_order: entry %d is %d, expected 0..%d", ckpt, i, ft->sampler.order[i],
                 ft->sampler.count - 1);
    uint64_t state[5];
    h5_read_uint64s(f, ckpt, "train/sampler_state", state, 5);
    RP_CHECK(state[0] < (uint64_t)ft->sampler.count, "%s: dataset /train/sampler_state: position %llu, expected "
             "below %d", ckpt, (unsigned long long)state[0], ft->sampler.count);
    ft->sampler.next = (int)state[0];
    memcpy(ft->sampler.rng.s, state + 1, sizeof ft->sampler.rng.s);
    int64_t best_step;
    ft->best = h5_read_double(f, ckpt, "train/best_metric");
    h5_read_int64s(f, ckpt, "train/best_step", &best_step, 1, &one);
    ft->best_step = (long)best_step;
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
    TaskScore score = task_predict(r, ft->dev, final ? predictions : NULL, run->log.jsonl, run->step);
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
}

int finetune(Run *run, const char *config_ini, TaskRunner *r, const TaskData *train_data, TaskData *dev_data) {
    const TaskConfig *task = &r->cfg.task;
    const TrainConfig *tc = &r->cfg.train;
    const TaskFeatures *train_set = &train_data->features;
    int B = r->B, accum = tc->grad_accum_steps;
    int regression = r->layout.type == TASK_REGRESSION && task->type != TASK_SQUAD;
    FineTuning ft = {r, train_set, dev_data, .best = NAN, .best_step = -1};
    long total = (long)ceil((double)task->epochs * train_set->count / ((double)B * accum));
    if (task->max_steps > 0 && task->max_steps < total)
        total = task->max_steps;
    int warmup = (int)(task->warmup_proportion * (double)total);
    ft.sampler = (Sampler){xmalloc(sizeof(int) * (size_t)train_set->count), train_set->count, 0, {{0}}};
    for (int i = 0; i < train_set->count; i++)
        ft.sampler.order[i] = i;
    rng_seed(&ft.sampler.rng, (uint64_t)task->seed);
    r->should_stop = stop_signal_received; /* a dev evaluation stops early too */
    rp_log("fine-tuning: %d sequences, %.3g epochs = %ld steps of %d x %d (warmup %d)", train_set->count,
           (double)task->epochs, total, accum, B, warmup);
    RunTask rt = {
        .name = "fine-tuning",
        .source = {next_task_batch, skip_task_batch, &ft},
        .head = loss_head_task(&r->model, &r->acts, &r->heads, regression),
        .schedule = {SCHED_LINEAR, task->lr, warmup, total, accum, tc->clip_grad_norm, (uint64_t)task->seed,
                     tc->log_interval, NULL},
        .eval_interval = dev_data ? task->eval_every : 0,
        .ctx = &ft,
        .evaluate = evaluate,
        .write_state = write_state,
        .read_state = read_state,
        .finish = finish,
    };
    int rc = run_train(run, config_ini, &r->model, &rt);
    free(ft.sampler.order);
    return rc;
}
