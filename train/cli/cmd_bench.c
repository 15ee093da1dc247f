/* realpos bench: time the training step users train with (train_step of train/loop/step.h: forward,
 * backward, gradient reduction and clipping, AdamW), one micro-batch per update, and the
 * cblas_sgemm peak of this machine in the same process, for `make bench` (scripts/dev/bench.sh).
 * The peak is the step's own (core/peak.h: the one training logs use, start-up probes and the
 * per-host cache), probed again after every step (outside the step timings); the probes' spread
 * shows the noise. Two batch sources:
 *   synthetic (default)   the same random batch every step: B sequences of L random ids, all real,
 *                         a fraction --label-frac of positions with a random MLM label; MLM loss.
 *   --lengths-from FILE   fine-tuning's own batches (train/loop/finetune.h FinetuneBatches): FILE
 *                         read as the task's training data (task_data_load: GLUE TSV per
 *                         task.glue_task or the task.*_column keys, SQuAD JSON with task.type =
 *                         squad; a malformed example is fatal unless task.bad_examples is set),
 *                         tokenized with [data] vocab and truncated to task.max_seq_len,
 *                         drawn by the TaskSampler (task.seed, task.group_by_length) in batches of
 *                         task.batch_size padded per task.padding; the task head's loss
 *                         (classifier, regression or span) on a model initialised from model.seed.
 * Tokens/s are counted two ways over the timed steps' micro-batches:
 *   real      attention_mask = 1 positions (what fine-tuning's logs count as tokens)
 *   computed  B x the batch's padded length (what the GEMMs multiply)
 * equal in synthetic mode. GFLOP/s is model_flops_per_step of each micro-batch's shape (what the
 * step's MFU counts) over the timed seconds. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/common.h"
#include "train/config/config.h"
#include "core/peak.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/cli/commands.h"
#include "train/loop/finetune.h"
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

/* The synthetic batch source: the same random batch every micro-batch. */
static void next_random_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    *out = ((const SyntheticBench *)ctx)->batch;
}

/* Random batch: full-length sequences, a fixed fraction of positions labelled. */
static void synthetic_create(SyntheticBench *s, const Config *cfg, int B, int L, double label_frac) {
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
    s->batch = (TrainBatch){{B, L, s->ids, s->types, s->mask, s->labels}, {0}, (long)N};
    activations_create(&s->acts, &s->model, B, L, M);
}

static void synthetic_free(SyntheticBench *s) {
    activations_free(&s->acts);
    model_free(&s->model);
    free(s->ids), free(s->types), free(s->mask), free(s->labels);
}

/* The fine-tuning source: the task's runner (model, head, batch buffers), its data and batches. */
typedef struct {
    TaskRunner r;
    TaskData data;
    FinetuneBatches batches;
    double mean_length; /* tokens per sequence of FILE, [CLS] and [SEP]s included */
} TaskBench;

static void task_bench_create(TaskBench *t, const Config *cfg, const char *path) {
    memset(t, 0, sizeof *t);
    TaskRunner *r = &t->r;
    r->cfg = *cfg;
    const TaskConfig *task = &r->cfg.task;
    RP_CHECK(access(path, R_OK) == 0, "--lengths-from %s: cannot read it: %s", path, strerror(errno));
    int named = task->type == TASK_SQUAD || task->glue_task != GLUE_NONE || config_key_is_set(cfg, "task", "text_a_column");
    RP_CHECK(named, "--lengths-from %s: it is read as the task's training data, and the config names no task: set "
             "task.glue_task (e.g. --set task.glue_task=sst2), task.type = squad, or the task.*_column keys", path);
    RP_CHECK(cfg->data.vocab[0], "key 'data.vocab': --lengths-from tokenizes %s with the config's vocabulary, got "
             "nothing (e.g. --set data.vocab=data/vocab/bert-base-uncased.txt)", path);
    RP_CHECK(!cfg->model.absolute_position || task->max_seq_len <= cfg->model.max_position,
             "task.max_seq_len %d exceeds model.max_position = %d (absolute positions)", task->max_seq_len,
             cfg->model.max_position);
    task_runner_derive(r);
    r->vocab_text = read_file(cfg->data.vocab, NULL, "vocabulary (key 'data.vocab')");
    r->tok = tokenizer_from_text(r->vocab_text, strlen(r->vocab_text), cfg->data.do_lower_case, cfg->data.vocab);
    r->special = tokenizer_special(r->tok);
    RP_CHECK(tokenizer_vocab_size(r->tok) == cfg->model.vocab_size, "%s: the vocabulary has %d tokens but "
             "model.vocab_size = %d", cfg->data.vocab, tokenizer_vocab_size(r->tok), cfg->model.vocab_size);
    model_create(&r->model, &r->cfg.model, task_runner_heads(r));
    model_init_weights(&r->model, (uint64_t)cfg->model.seed);
    task_data_load(&t->data, task, &r->layout, r->tok, r->L, path, 1);
    task_runner_buffers(r);
    finetune_batches_create(&t->batches, r, &t->data.features);
    long total = 0;
    for (int i = 0; i < t->data.features.count; i++)
        total += t->data.features.lengths[i];
    t->mean_length = (double)total / t->data.features.count;
}

static void task_bench_free(TaskBench *t) {
    finetune_batches_free(&t->batches);
    task_data_free(&t->data);
    task_runner_free(&t->r);
}

/* Around the source: what the timed micro-batches hold (reset before the first timed step). The
 * step loop never allocates: lengths has room for every micro-batch of the run. */
typedef struct {
    BatchSource inner;
    long real_tokens, computed_tokens; /* attention_mask = 1 positions; B x padded length */
    int *lengths;                      /* [capacity] padded length of each micro-batch since the reset */
    int count, capacity;
} CountedSource;

static void next_counted(void *ctx, long step, int micro, TrainBatch *out) {
    CountedSource *c = ctx;
    c->inner.next(c->inner.ctx, step, micro, out);
    RP_CHECK(c->count < c->capacity, "internal: more micro-batches than the bench's steps");
    c->lengths[c->count++] = out->batch.L;
    c->real_tokens += out->num_tokens;
    c->computed_tokens += (long)out->batch.B * out->batch.L;
}

/* --batch-size / --seq-len as the task's keys (they win over the config's), so that validation
 * and its messages see them. */
static void add_task_override(CliArgs *args, char *buffer, size_t size, const char *key, const char *value) {
    if (!value)
        return;
    RP_CHECK(args->num_sets < CLI_MAX_SETS, "too many --set options (at most %d with --lengths-from)",
             CLI_MAX_SETS - 2);
    snprintf(buffer, size, "task.%s=%s", key, value);
    args->sets[args->num_sets++] = buffer;
}

int cmd_bench(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *json_path = NULL, *batch_text = NULL, *seq_text = NULL, *steps_text = "10", *warmup_text = "2",
               *label_text = NULL, *lengths_path = NULL;
    CliOption options[] = {{"batch-size", &batch_text}, {"seq-len", &seq_text},     {"steps", &steps_text},
                           {"warmup", &warmup_text},    {"label-frac", &label_text}, {"json", &json_path},
                           {"lengths-from", &lengths_path}};
    CliArgs args = cli_parse(argc, argv, options, 7);
    RP_CHECK(args.num_positional == 1 && (lengths_path || (batch_text && seq_text)), "usage: realpos %s", usage);
    RP_CHECK(!(lengths_path && label_text), "--label-frac sets the MLM labels of the synthetic batch; with "
             "--lengths-from the step trains the task's head; usage: realpos %s", usage);
    int steps = (int)cli_int("--steps", steps_text, 1, 1 << 20), warmup = (int)cli_int("--warmup", warmup_text, 0, 1 << 20);
    double label_frac = 0.15;
    if (label_text) {
        char *end;
        label_frac = strtod(label_text, &end);
        RP_CHECK(*label_text && !*end && label_frac >= 0 && label_frac <= 1, "option '--label-frac': expected a "
                 "number in [0, 1], got '%s'", label_text);
    }
    char batch_set[64], seq_set[64];
    if (lengths_path) {
        add_task_override(&args, batch_set, sizeof batch_set, "batch_size", batch_text);
        add_task_override(&args, seq_set, sizeof seq_set, "max_seq_len", seq_text);
    }
    Config cfg;
    config_load_model(&cfg, args.positional[0], args.num_sets, args.sets);
    if (lengths_path) {
        config_validate(&cfg); /* the task's keys, and [data]'s, are the bench's too */
        if (!config_key_is_set(&cfg, "task", "bad_examples"))
            cfg.task.bad_examples = BAD_FATAL; /* a bench measures the file it is given, all of it */
    }
    if (cfg.train.threads > 0)
        omp_set_num_threads(cfg.train.threads);
    int B = lengths_path ? cfg.task.batch_size : (int)cli_int("--batch-size", batch_text, 1, 1 << 20);
    int L = lengths_path ? cfg.task.max_seq_len : (int)cli_int("--seq-len", seq_text, 1, 1 << 20);

    SyntheticBench synthetic;
    TaskBench task;
    Model *m;
    LossHead head;
    BatchSource inner;
    StepConfig sc = {SCHED_CONSTANT, cfg.optim.lr, 0, warmup + steps, 1, cfg.train.clip_grad_norm,
                     (uint64_t)cfg.model.seed, warmup + steps + 1, NULL};
    int M = 0; /* MLM labels per batch */
    if (lengths_path) {
        task_bench_create(&task, &cfg, lengths_path);
        m = &task.r.model;
        head = finetune_loss_head(&task.r);
        inner = finetune_batch_source(&task.batches);
        sc.peak_lr = cfg.task.lr, sc.dropout_seed = (uint64_t)cfg.task.seed;
    } else {
        synthetic_create(&synthetic, &cfg, B, L, label_frac);
        m = &synthetic.model;
        head = loss_head_mlm(&synthetic.acts);
        inner = (BatchSource){next_random_batch, NULL, &synthetic};
        M = synthetic.labelled;
    }
    Dist dist;
    dist_init(&dist, NULL, NULL);
    DpAdamW opt;
    dp_adamw_create(&opt, &dist, &m->table, 0);
    CountedSource counted = {inner, 0, 0, xmalloc(sizeof(int) * (size_t)(warmup + steps)), 0, warmup + steps};
    TrainStep ts;
    train_step_init(&ts, &sc, m, &opt, &cfg.optim, head, (BatchSource){next_counted, NULL, &counted}, NULL, 0);

    const int max_probes = steps + 1;
    double *probes = xmalloc(sizeof(double) * (size_t)max_probes), *step_s = xmalloc(sizeof(double) * (size_t)steps);
    int num_probes = 0;
    PeakEstimate *peak = &ts.peak;
    peak->spread_left = 0; /* the bench probes after every step itself, outside the timings */
    probes[num_probes++] = peak->probe_gflops;
    double elapsed = 0, cpu_elapsed = 0, t_forward = 0, t_backward = 0, t_update = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) /* count the timed steps' micro-batches only */
            counted.real_tokens = counted.computed_tokens = counted.count = 0;
        StepPhases before = ts.phases;
        double t0 = now_seconds(), c0 = cpu_seconds();
        train_step(&ts, s);
        double t1 = now_seconds(), c1 = cpu_seconds();
        if (s < warmup)
            continue;
        step_s[s - warmup] = t1 - t0;
        elapsed += t1 - t0, cpu_elapsed += c1 - c0;
        t_forward += ts.phases.forward - before.forward;
        t_backward += ts.phases.backward - before.backward;
        t_update += ts.phases.update - before.update;
        probes[num_probes++] = peak_probe(peak);
    }
    double flops = 0;
    for (int i = 0; i < counted.count; i++)
        flops += model_flops_per_step(&cfg.model, B, counted.lengths[i], M);
    double tokens_per_s = (double)counted.computed_tokens / elapsed;
    double real_tokens_per_s = (double)counted.real_tokens / elapsed;
    double mean_padded = (double)counted.computed_tokens / ((double)B * counted.count);
    double gflops = flops / elapsed * 1e-9;
    double fraction = peak_utilisation(peak, gflops);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    char cpu_model[256], tokens_text[160];
    cpu_model_name(cpu_model, sizeof cpu_model);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    const char *task_name = cfg.task.type == TASK_SQUAD ? "squad" : glue_task_name(cfg.task.glue_task);
    if (lengths_path) {
        printf("bench: fine-tuning %s on %s: %d sequences of %.1f tokens on average (at most %d), batches of %d "
               "padded to %s%s; the timed batches: %.1f real tokens per sequence, padded to %.1f\n", task_name,
               lengths_path, task.data.features.count, task.mean_length, L, B,
               cfg.task.padding == PAD_LONGEST ? "their longest sequence" : "task.max_seq_len",
               cfg.task.group_by_length ? ", grouped by length" : "",
               (double)counted.real_tokens / ((double)B * counted.count), mean_padded);
        snprintf(tokens_text, sizeof tokens_text, "%.1f real tokens/s (%.1f computed: B x padded length)",
                 real_tokens_per_s, tokens_per_s);
    } else {
        snprintf(tokens_text, sizeof tokens_text, "%.1f tokens/s", tokens_per_s);
    }
    printf("realpos: %d threads, %s, %.1f GFLOP/s (%.0f%% of peak %.1f from the %s; this run's %d "
           "probes best %.1f), "
           "peak RSS %.0f MB; per step: forward %.3f s, backward %.3f s, reduce+clip+AdamW %.3f s, CPU %.3f s; "
           "%s, OpenBLAS core %s%s%s\n",
           omp_get_max_threads(), tokens_text, gflops, 100.0 * fraction, peak->gflops, peak->source, peak->probes,
           peak->probe_gflops,
           rss_mb, t_forward / steps, t_backward / steps, t_update / steps, cpu_elapsed / steps, cpu_model,
           blas_core_name(), coretype ? ", OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    if (json_path) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "impl", "realpos");
        cJSON_AddNumberToObject(o, "threads", omp_get_max_threads());
        cJSON_AddNumberToObject(o, "batch_size", B);
        cJSON_AddNumberToObject(o, "seq_len", L); /* --lengths-from: the cap, task.max_seq_len */
        cJSON_AddNumberToObject(o, "steps", steps);
        cJSON_AddNumberToObject(o, "labelled", M);
        cJSON_AddNumberToObject(o, "tokens_per_s", tokens_per_s); /* computed */
        cJSON_AddNumberToObject(o, "computed_tokens_per_s", tokens_per_s);
        cJSON_AddNumberToObject(o, "real_tokens_per_s", real_tokens_per_s);
        cJSON_AddNumberToObject(o, "computed_tokens", (double)counted.computed_tokens);
        cJSON_AddNumberToObject(o, "real_tokens", (double)counted.real_tokens);
        cJSON_AddItemToObject(o, "batch_lengths", cJSON_CreateIntArray(counted.lengths, counted.count));
        if (lengths_path) {
            cJSON *ft = cJSON_AddObjectToObject(o, "finetune");
            cJSON_AddStringToObject(ft, "file", lengths_path);
            cJSON_AddStringToObject(ft, "task", task_name);
            cJSON_AddNumberToObject(ft, "sequences", task.data.features.count);
            cJSON_AddNumberToObject(ft, "mean_length", task.mean_length);
            cJSON_AddStringToObject(ft, "padding", cfg.task.padding == PAD_LONGEST ? "longest" : "max_length");
            cJSON_AddBoolToObject(ft, "group_by_length", cfg.task.group_by_length);
        } else {
            cJSON_AddNullToObject(o, "finetune");
        }
        cJSON_AddNumberToObject(o, "gflops", gflops);
        cJSON_AddNumberToObject(o, "sgemm_peak_gflops", peak->probe_gflops); /* the best of probes[] */
        cJSON_AddNumberToObject(o, "peak_gflops", peak->gflops);
        cJSON_AddStringToObject(o, "peak_source", peak->source);
        cJSON_AddNumberToObject(o, "peak_fraction", fraction);
        cJSON_AddItemToObject(o, "sgemm_probes_gflops", cJSON_CreateDoubleArray(probes, num_probes));
        cJSON_AddItemToObject(o, "step_seconds", cJSON_CreateDoubleArray(step_s, steps));
        cJSON_AddNumberToObject(o, "peak_rss_mb", rss_mb);
        cJSON_AddNumberToObject(o, "seconds_per_step", elapsed / steps);
        cJSON_AddNumberToObject(o, "cpu_seconds_per_step", cpu_elapsed / steps);
        cJSON_AddNumberToObject(o, "forward_s", t_forward / steps);
        cJSON_AddNumberToObject(o, "backward_s", t_backward / steps);
        cJSON_AddNumberToObject(o, "update_s", t_update / steps);
        cJSON_AddStringToObject(o, "cpu_model", cpu_model);
        cJSON_AddStringToObject(o, "openblas_corename", blas_core_name());
        if (coretype)
            cJSON_AddStringToObject(o, "openblas_coretype_env", coretype);
        else
            cJSON_AddNullToObject(o, "openblas_coretype_env");
        char *text = cJSON_Print(o);
        size_t len = strlen(text);
        text = realloc(text, len + 2);
        RP_CHECK(text, "out of memory");
        memcpy(text + len, "\n", 2);
        write_file(json_path, text, len + 1); /* temp + fsync + rename */
        free(text);
        cJSON_Delete(o);
    }
    free(probes), free(step_s), free(counted.lengths);
    dp_adamw_free(&opt);
    dist_finalize(&dist);
    if (lengths_path)
        task_bench_free(&task);
    else
        synthetic_free(&synthetic);
    return 0;
}
