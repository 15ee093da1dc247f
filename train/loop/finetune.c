/* The fine-tuning loop (finetune.h).
 *
 * finetune: the model config is the init checkpoint's with the changes the [model] section may make
 * (config_adopt_model); the absolute position table grows to task.max_seq_len if needed; the
 * vocabulary and casing come from the checkpoint. Parameters transfer by name and shape
 * (transfer.h). A step is one batch of B sequences drawn from a fresh permutation of the training
 * sequences each epoch; AdamW with [optim]'s betas, eps and weight decay, peak task.lr, linear
 * warmup over warmup_proportion of the steps then linear decay to 0, clipping at
 * train.clip_grad_norm. At the end: dev predictions and metrics, and RUN_DIR/model.h5 (same
 * schema, task head included, /vocab) from which `predict` reproduces the dev predictions. */
#include "train/loop/finetune.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "train/loop/metrics.h"
#include "train/loop/run_dir.h"
#include "train/loop/step.h"
#include "train/model/checkpoint.h"

static void write_vocab(hid_t file, const void *ctx) {
    const TaskRunner *r = ctx;
    checkpoint_write_vocab(file, r->vocab_text, r->cfg.data.do_lower_case);
}

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

/* BatchSource of fine-tuning: the next B sequences of the epoch's permutation. */
typedef struct {
    TaskRunner *runner;
    const TaskFeatures *train_set;
    Sampler sampler;
} TaskSource;

static void next_task_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    TaskSource *src = ctx;
    TaskRunner *r = src->runner;
    sampler_next(&src->sampler, r->rows, r->B);
    task_fill_batch(r, src->train_set, r->rows);
    long tokens = 0;
    for (int n = 0; n < r->B * r->L; n++)
        tokens += r->attention_mask[n];
    *out = (TrainBatch){{r->B, r->L, r->input_ids, r->token_type_ids, r->attention_mask, NULL},
                        {r->labels, r->values, r->start, r->end}, tokens};
}

static void train(TaskRunner *r, const TaskFeatures *train_set, MetricsLog *log) {
    const TaskConfig *task = &r->cfg.task;
    int B = r->B, regression = r->layout.type == TASK_REGRESSION && task->type != TASK_SQUAD;
    long total = (long)ceil((double)task->epochs * train_set->count / B);
    if (task->max_steps > 0 && task->max_steps < total)
        total = task->max_steps;
    int warmup = (int)(task->warmup_proportion * (double)total);
    AdamW opt;
    adamw_create(&opt, &r->model.table);
    TaskSource src = {r, train_set, {xmalloc(sizeof(int) * (size_t)train_set->count), train_set->count, 0, {{0}}}};
    for (int i = 0; i < train_set->count; i++)
        src.sampler.order[i] = i;
    rng_seed(&src.sampler.rng, (uint64_t)task->seed);
    StepConfig sc = {SCHED_LINEAR, task->lr, warmup, total, 1, r->cfg.train.clip_grad_norm, (uint64_t)task->seed,
                     r->cfg.train.log_interval, NULL};
    TrainStep ts;
    train_step_init(&ts, &sc, &r->model, &opt, &r->cfg.optim, loss_head_task(&r->model, &r->acts, &r->heads, regression),
                    (BatchSource){next_task_batch, &src}, log, 0);
    rp_log("fine-tuning: %d sequences, %.3g epochs = %ld steps of %d (warmup %d), %d threads", train_set->count,
           (double)task->epochs, total, B, warmup, omp_get_max_threads());
    for (long step = 0; step < total; step++)
        train_step(&ts, step);
    free(src.sampler.order);
    adamw_free(&opt);
}

void finetune_run(TaskRunner *r, const TaskData *train_data, TaskData *dev_data, const char *config_ini) {
    const char *run_dir = r->cfg.train.run_dir;
    run_dir_open(run_dir, config_ini);
    MetricsLog log;
    metrics_open(&log, run_dir, 0);
    train(r, &train_data->features, &log);

    char path[CONFIG_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/model.h5", run_dir);
    CheckpointExtras extras = {config_ini, NULL, write_vocab, r};
    checkpoint_save(path, &r->model, &extras);
    rp_log("fine-tuned checkpoint %s", path);
    if (dev_data) {
        snprintf(path, sizeof path, "%s/%s", run_dir, r->cfg.task.type == TASK_SQUAD ? "predictions.json"
                                                                                      : "dev_predictions.tsv");
        task_predict(r, dev_data, path, log.jsonl);
    }
    metrics_close(&log);
}
