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
#include "core/peak.h"
#include "core/rng.h"
#include "train/loop/metrics.h"
#include "train/loop/run_dir.h"
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

static void train(TaskRunner *r, const TaskFeatures *train_set, MetricsLog *log) {
    const TaskConfig *task = &r->cfg.task;
    int B = r->B, L = r->L, regression = r->layout.type == TASK_REGRESSION && task->type != TASK_SQUAD;
    long total = (long)ceil((double)task->epochs * train_set->count / B);
    if (task->max_steps > 0 && task->max_steps < total)
        total = task->max_steps;
    int warmup = (int)(task->warmup_proportion * (double)total);
    AdamW opt;
    adamw_create(&opt, &r->model.table);
    Sampler sampler = {xmalloc(sizeof(int) * (size_t)train_set->count), train_set->count, 0, {{0}}};
    for (int i = 0; i < train_set->count; i++)
        sampler.order[i] = i;
    rng_seed(&sampler.rng, (uint64_t)task->seed);
    double peak = sgemm_peak_gflops() * 1e9, t_begin = now_seconds(), window_seconds = 0, window_loss = 0;
    double window_flops = 0;
    long window_tokens = 0, window_correct = 0, window_sequences = 0, window_start = 0;
    rp_log("fine-tuning: %d sequences, %.3g epochs = %ld steps of %d (warmup %d), %d threads", train_set->count,
           (double)task->epochs, total, B, warmup, omp_get_max_threads());
    HeadTargets targets = {r->labels, r->values, r->start, r->end};
    for (long step = 0; step < total; step++) {
        double t_step = now_seconds();
        sampler_next(&sampler, r->rows, B);
        task_fill_batch(r, train_set, r->rows);
        Batch batch = {B, L, r->input_ids, r->token_type_ids, r->attention_mask, NULL};
        uint64_t key = hash_key((uint64_t)task->seed, (uint64_t)step, 0);
        memset(r->model.grads, 0, sizeof(float) * r->model.table.block_floats);
        const float *hidden = model_encode(&r->model, &r->acts, &batch, 1, key);
        head_forward(&r->model, &r->heads, hidden, 1, key);
        int correct;
        float loss = head_loss(&r->heads, &targets, regression, &correct);
        RP_CHECK(isfinite(loss), "step %ld: the loss is %f; stopping without saving", step + 1, loss);
        head_backward(&r->model, &r->heads, hidden, &targets, regression, r->acts.d_hidden_a);
        model_encode_backward(&r->model, &r->acts, &batch);
        GradClip clip = grad_clip(r->model.grads, r->model.table.block_floats, r->cfg.train.clip_grad_norm);
        double norm = clip.norm;
        RP_CHECK(isfinite(norm), "step %ld: the gradient norm is %f; stopping without saving", step + 1, norm);
        float lr = lr_schedule(SCHED_LINEAR, task->lr, (int)step, warmup, (int)total);
        adamw_step(&opt, &r->model.table, r->model.params, r->model.grads, &r->cfg.optim, lr, clip.scale);

        for (int n = 0; n < B * L; n++)
            window_tokens += r->attention_mask[n];
        window_loss += loss;
        window_correct += correct;
        window_sequences += B;
        window_flops += model_flops_per_step(&r->model.cfg, B, L, 0);
        double now = now_seconds(), dt = (window_seconds += now - t_step);
        long done = step + 1, in_window = done - window_start;
        MetricsRecord rec = {.kind = "train", .step = done, .total_steps = total,
                             .loss = window_loss / (double)in_window,
                             .accuracy = regression ? 0 : (double)window_correct / (double)window_sequences,
                             .lr = lr, .grad_norm = norm, .tokens_per_s = (double)window_tokens / dt,
                             .mfu = window_flops / dt / peak, .elapsed_s = now - t_begin,
                             .eta_s = dt / (double)in_window * (double)(total - done)};
        if (done % r->cfg.train.log_interval == 0 || done == total) {
            metrics_write(log, &rec);
            window_seconds = window_loss = window_flops = 0;
            window_tokens = window_correct = window_sequences = 0;
            window_start = done;
        } else {
            metrics_progress(log, &rec);
        }
    }
    free(sampler.order);
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
