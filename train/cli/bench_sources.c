/* The batch sources of `realpos bench` (bench_sources.h). */
#include "train/cli/bench_sources.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/rng.h"
#include "layers/layers.h"


/* Random batch: full-length sequences, a fixed fraction of positions labelled. */
void synthetic_create(SyntheticBench *s, const Config *cfg, int B, int L, double label_frac) {
    model_create(&s->model, &cfg->model, heads_mlm());
    model_init_weights(&s->model, (uint64_t)cfg->model.seed);
    size_t N = (size_t)B * L;
    s->ids = xmalloc(sizeof(int) * N), s->types = xcalloc(N, sizeof(int)), s->mask = xmalloc(sizeof(int) * N),
    s->labels = xmalloc(sizeof(int) * N);
    Rng rng;
    rng_seed(&rng, 1234);
    int M = 0;
    for (size_t n = 0; n < N; n++) {
        s->ids[n] = (int)rng_below(&rng, (uint64_t)cfg->model.vocab_size);
        s->mask[n] = 1;
        int labelled = rng_uniform(&rng) < label_frac;
        s->labels[n] = labelled ? (int)rng_below(&rng, (uint64_t)cfg->model.vocab_size) : IGNORE_LABEL;
        M += labelled;
    }
    s->labelled = M;
    s->batch = (TrainBatch){{B, L, s->ids, s->types, s->mask, s->labels, NULL}, {0}, (long)N};
    activations_create(&s->acts, &s->model, B, L, M, cfg->train.precision);
}

void synthetic_free(SyntheticBench *s) {
    activations_free(&s->acts);
    model_free(&s->model);
    free(s->ids), free(s->types), free(s->mask), free(s->labels);
}


static double mean_length(const TaskFeatures *f) {
    long total = 0;
    for (int i = 0; i < f->count; i++)
        total += f->lengths[i];
    return (double)total / f->count;
}

/* FILE as the training file of a tagging run (task.type = tagging): its label set and, with
 * task.init_checkpoint = none, a fresh model whose vocabulary is data.vocab or FILE's words (as
 * `realpos finetune` builds it); with a checkpoint, the model is fresh too (the bench times steps,
 * not transfer) over data.vocab. */
static void tagging_bench_create(TaskBench *t, const Config *cfg, const char *path) {
    TaskRunner *r = &t->r;
    RP_CHECK(task_from_scratch(&cfg->task) || cfg->data.vocab[0], "--lengths-from %s (a tagging file): "
             "task.init_checkpoint is set and key 'data.vocab' is empty: set task.init_checkpoint = none (the "
             "vocabulary is then the file's words) or data.vocab", path);
    r->cfg = *cfg;
    snprintf(r->cfg.task.train_file, sizeof r->cfg.task.train_file, "%s", path);
    snprintf(r->cfg.task.init_checkpoint, sizeof r->cfg.task.init_checkpoint, "none");
    tagging_prepare(r, 1);
    task_runner_build_fresh(r, NULL);
    task_runner_buffers(r);
    task_data_load(&t->data, &r->cfg.task, &r->layout, r->tok, r->L, path, 1);
    finetune_batches_create(&t->batches, r, &t->data.features);
}

void task_bench_create(TaskBench *t, const Config *cfg, const char *path) {
    memset(t, 0, sizeof *t);
    TaskRunner *r = &t->r;
    const TaskConfig *task = &cfg->task;
    RP_CHECK(access(path, R_OK) == 0, "--lengths-from %s: cannot read it: %s", path, strerror(errno));
    if (task->type == TASK_TAGGING) { /* a tagging file: the model finetune would train on it */
        tagging_bench_create(t, cfg, path);
        t->mean_length = mean_length(&t->data.features);
        return;
    }
    int named = task->type == TASK_SQUAD || task->glue_task != GLUE_NONE || config_key_is_set(cfg, "task", "text_a_column");
    RP_CHECK(named, "--lengths-from %s: it is read as the task's training data, and the config names no task: set "
             "task.glue_task (e.g. --set task.glue_task=sst2), task.type = squad, or the task.*_column keys", path);
    RP_CHECK(cfg->data.vocab[0], "key 'data.vocab': --lengths-from tokenizes %s with the config's vocabulary, got "
             "nothing (e.g. --set data.vocab=data/vocab/bert-base-uncased.txt)", path);
    RP_CHECK(!cfg->model.absolute_position || task->max_seq_len <= cfg->model.max_position,
             "task.max_seq_len %d exceeds model.max_position = %d (absolute positions)", task->max_seq_len,
             cfg->model.max_position);
    task_runner_fresh(r, cfg);
    task_data_load(&t->data, &r->cfg.task, &r->layout, r->tok, r->L, path, 1);
    finetune_batches_create(&t->batches, r, &t->data.features);
    t->mean_length = mean_length(&t->data.features);
}

void task_bench_free(TaskBench *t) {
    finetune_batches_free(&t->batches);
    task_data_free(&t->data);
    task_runner_free(&t->r);
}


void next_counted(void *ctx, long step, int micro, TrainBatch *out) {
    CountedSource *c = ctx;
    c->inner.next(c->inner.ctx, step, micro, out);
    RP_CHECK(c->count < c->capacity, "internal: more micro-batches than the bench's steps");
    c->lengths[c->count++] = out->batch.L;
    c->real_tokens += out->num_tokens;
    c->computed_tokens += batch_rows(&out->batch);
    int M = 0;
    for (int n = 0; c->mlm && out->batch.labels && n < batch_rows(&out->batch); n++)
        M += out->batch.labels[n] != IGNORE_LABEL;
    c->flops += model_flops_of_batch(c->model, &out->batch, M);
}


void shard_bench_create(ShardBench *s, const Config *cfg) {
    memset(s, 0, sizeof *s);
    RP_CHECK(cfg->data.vocab[0] && cfg->data.shard_dir[0], "--from-shards: the config names no [data] vocab and "
             "shard_dir (prepared by realpos prepare)");
    mlm_data_open(&s->data, cfg, read_file(cfg->data.vocab, NULL, "vocabulary ([data] vocab)"), cfg->data.vocab);
    model_create(&s->model, &cfg->model, heads_mlm());
    model_init_weights(&s->model, (uint64_t)cfg->model.seed);
    activations_create(&s->acts, &s->model, cfg->train.batch_size, cfg->data.max_seq_len, mlm_max_predictions(cfg),
                       cfg->train.precision);
}

void shard_bench_free(ShardBench *s) {
    activations_free(&s->acts);
    model_free(&s->model);
    mlm_data_free(&s->data);
}

static void next_shard_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    ShardBench *s = ctx;
    const Batch b = mlm_data_next(&s->data);
    *out = (TrainBatch){b, {0}, s->data.batch->num_tokens};
}

BatchSource shard_bench_source(ShardBench *s) { return (BatchSource){next_shard_batch, NULL, s}; }
