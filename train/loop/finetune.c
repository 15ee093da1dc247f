/* realpos finetune / predict.
 *
 * finetune: the model config is the init checkpoint's with the changes the [model] section may make
 * (config_adopt_model); the absolute position table grows to task.max_seq_len if needed; the
 * vocabulary and casing come from the checkpoint. Parameters transfer by name and shape
 * (transfer.h). A step is one batch of B sequences drawn from a fresh permutation of the training
 * sequences each epoch; AdamW with [optim]'s betas, eps and weight decay, peak task.lr, linear
 * warmup over warmup_proportion of the steps then linear decay to 0, clipping at
 * train.clip_grad_norm. At the end: dev predictions and metrics, and RUN_DIR/model.h5 (same
 * schema, task head included, /vocab) from which `predict` reproduces the dev predictions. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/cli.h"
#include "core/common.h"
#include "core/h5io.h"
#include "core/peak.h"
#include "core/rng.h"
#include "train/model/checkpoint.h"
#include "train/cli/commands.h"
#include "train/loop/finetune.h"
#include "train/loop/metrics.h"
#include "train/loop/pretrain.h"
#include "train/model/transfer.h"

static ModelHeads task_heads(const TaskRunner *r) {
    if (r->cfg.task.type == TASK_SQUAD)
        return (ModelHeads){0, 0, 0, 1};
    return (ModelHeads){0, 1, r->layout.type == TASK_REGRESSION ? 1 : r->layout.num_labels, 0};
}

/* Vocabulary of a checkpoint (/vocab), or the file its stored [data] names. */
static void load_vocab(TaskRunner *r, hid_t file, const char *path, const Config *stored) {
    int lower = stored->data.do_lower_case;
    r->vocab_text = checkpoint_read_vocab(file, path, &lower);
    const char *origin = path;
    if (!r->vocab_text) {
        RP_CHECK(stored->data.vocab[0], "%s: no /vocab and no [data] vocab in its config", path);
        r->vocab_text = read_file(stored->data.vocab, NULL, "vocabulary (the checkpoint's [data] vocab)");
        origin = stored->data.vocab;
    }
    r->cfg.data.do_lower_case = lower;
    r->tok = tokenizer_from_text(r->vocab_text, strlen(r->vocab_text), lower, origin);
    r->special = tokenizer_special(r->tok);
    RP_CHECK(tokenizer_vocab_size(r->tok) == r->cfg.model.vocab_size,
             "%s: the vocabulary has %d tokens but model.vocab_size = %d", origin, tokenizer_vocab_size(r->tok),
             r->cfg.model.vocab_size);
}

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

/* The task's model from the init checkpoint; prints the transfer table. */
static void build_model(TaskRunner *r, const char *ckpt) {
    char *stored_ini;
    hid_t f = checkpoint_open(ckpt, &stored_ini);
    Config stored;
    config_load_string(&stored, stored_ini, ckpt);
    config_adopt_model(&r->cfg, &stored, ckpt);
    ModelConfig *mc = &r->cfg.model;
    if (mc->absolute_position && r->cfg.task.max_seq_len > mc->max_position) {
        rp_log("task.max_seq_len %d > the checkpoint's model.max_position %d: the absolute position table grows to "
               "%d rows (rows %d-%d newly initialised)", r->cfg.task.max_seq_len, mc->max_position,
               r->cfg.task.max_seq_len, mc->max_position, r->cfg.task.max_seq_len - 1);
        mc->max_position = r->cfg.task.max_seq_len;
    }
    if (!mc->absolute_position && r->cfg.task.max_seq_len > stored.data.max_seq_len)
        rp_log("task.max_seq_len %d is longer than the checkpoint's pretraining sequences (%d): relative positions "
               "only, no change needed", r->cfg.task.max_seq_len, stored.data.max_seq_len);
    load_vocab(r, f, ckpt, &stored);
    model_create(&r->model, mc, task_heads(r));
    model_init_weights(&r->model, (uint64_t)r->cfg.task.seed);
    transfer_load(f, ckpt, &r->model, stderr);
    h5_close(f, ckpt);
    free(stored_ini);
}

static void runner_setup(TaskRunner *r, const char *config_path, const CliArgs *args) {
    memset(r, 0, sizeof *r);
    config_load_task(&r->cfg, config_path, args->num_sets, args->sets);
    if (r->cfg.train.threads > 0)
        omp_set_num_threads(r->cfg.train.threads);
    r->layout = glue_layout(&r->cfg.task);
    if (r->cfg.task.glue_task != GLUE_NONE)
        r->cfg.task.type = r->layout.type;
    r->B = r->cfg.task.batch_size;
    r->L = r->cfg.task.max_seq_len;
}

int cmd_finetune(int argc, char **argv) {
    const char *usage = "finetune CONFIG.ini [--set section.key=value ...]";
    CliArgs args = cli_parse(argc, argv, NULL, 0);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", usage);
    TaskRunner r;
    runner_setup(&r, args.positional[0], &args);
    const TaskConfig *task = &r.cfg.task;
    RP_CHECK(task->init_checkpoint[0], "%s: key 'task.init_checkpoint': expected the checkpoint to start from, got "
             "nothing", args.positional[0]);
    RP_CHECK(task->train_file[0], "%s: key 'task.train_file': expected a training file, got nothing",
             args.positional[0]);
    build_model(&r, task->init_checkpoint);
    char *config_ini = config_to_ini(&r.cfg);
    fprintf(stderr, "# effective configuration\n%s\n", config_ini);
    TaskData train_data, dev_data;
    task_data_load(&train_data, &r, task->train_file, 1);
    if (task->dev_file[0])
        task_data_load(&dev_data, &r, task->dev_file, 0);
    task_runner_buffers(&r);

    const char *run_dir = r.cfg.train.run_dir;
    mkdir_p(run_dir);
    char path[CONFIG_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/config.ini", run_dir);
    FILE *f = fopen(path, "w");
    RP_CHECK(f, "%s: cannot write", path);
    fputs(config_ini, f);
    fclose(f);
    MetricsLog log;
    metrics_open(&log, run_dir, 0);
    train(&r, &train_data.features, &log);

    snprintf(path, sizeof path, "%s/model.h5", run_dir);
    CheckpointExtras extras = {config_ini, NULL, write_vocab, &r};
    checkpoint_save(path, &r.model, &extras);
    rp_log("fine-tuned checkpoint %s", path);
    if (task->dev_file[0]) {
        snprintf(path, sizeof path, "%s/%s", run_dir, task->type == TASK_SQUAD ? "predictions.json"
                                                                                : "dev_predictions.tsv");
        task_predict(&r, &dev_data, path, log.jsonl);
        task_data_free(&dev_data);
    }
    metrics_close(&log);
    task_data_free(&train_data);
    task_runner_free(&r);
    free(config_ini);
    return 0;
}

int cmd_predict(int argc, char **argv) {
    const char *usage = "predict CONFIG.ini --checkpoint CKPT --input FILE --out FILE [--set ...]";
    const char *ckpt = NULL, *input = NULL, *out = NULL;
    CliOption options[] = {{"checkpoint", &ckpt}, {"input", &input}, {"out", &out}};
    CliArgs args = cli_parse(argc, argv, options, 3);
    RP_CHECK(args.num_positional == 1 && ckpt && input && out, "usage: realpos %s", usage);
    TaskRunner r;
    runner_setup(&r, args.positional[0], &args);
    char *stored_ini;
    hid_t f = checkpoint_open(ckpt, &stored_ini);
    Config stored;
    config_load_string(&stored, stored_ini, ckpt);
    r.cfg.model = stored.model; /* the checkpoint defines the model */
    r.cfg.data = stored.data;
    ModelHeads heads = checkpoint_heads(f, ckpt), want = task_heads(&r);
    RP_CHECK(heads.span == want.span && heads.num_labels == want.num_labels && !heads.mlm,
             "%s: its heads (%s%s, %d classifier outputs) do not fit task.type = %s with %d outputs; predict needs a "
             "checkpoint written by `realpos finetune` for this task", ckpt, heads.mlm ? "MLM, " : "",
             heads.span ? "span" : "no span", heads.num_labels, task_kind_name(r.cfg.task.type), want.num_labels);
    RP_CHECK(!r.cfg.model.absolute_position || r.L <= r.cfg.model.max_position,
             "task.max_seq_len %d exceeds the checkpoint's model.max_position = %d (absolute positions)", r.L,
             r.cfg.model.max_position);
    load_vocab(&r, f, ckpt, &stored);
    model_create(&r.model, &r.cfg.model, heads);
    checkpoint_load_model(f, ckpt, &r.model);
    h5_close(f, ckpt);
    free(stored_ini);
    TaskData data;
    task_data_load(&data, &r, input, 0);
    task_runner_buffers(&r);
    task_predict(&r, &data, out, NULL);
    task_data_free(&data);
    task_runner_free(&r);
    return 0;
}
