/* realpos bench: time the training step users train with (train_step of train/loop/step.h: forward,
 * backward, gradient reduction and clipping, AdamW), one micro-batch per update, and the
 * peak of this machine in the same process, for `make bench` (scripts/dev/bench.sh). The peak is
 * the step's own (train/loop/peak.h: the one training logs use, start-up probes and the per-host cache;
 * the sgemm peak in fp32, the bf16 one, probed on the step's linear-layer products, in bf16),
 * probed again after every step (outside the step timings); the probes' spread shows the noise.
 * --probes start probes only at start-up, so a profiler attached to the run samples only steps
 * (scripts/dev/profile_step.sh); the JSON's probe lists then hold the start-up probe alone.
 * A bf16 run (or pair) also probes the other precision's peak, for the JSON's sgemm_* and bf16_*
 * probe lists. Two batch sources:
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
 *   --from-shards DIR     pretraining's own batches: the training stream of the shard set DIR
 *                         (train/loop/pretrain.h mlm_data_next, laid out per data.padding), MLM loss.
 * Tokens/s are counted two ways over the timed steps' micro-batches:
 *   real      attention_mask = 1 positions (what fine-tuning's logs count as tokens)
 *   computed  B x the batch's padded length, or T of an unpadded batch (what the GEMMs multiply)
 * equal in synthetic mode. GFLOP/s is model_flops_of_batch of each micro-batch (what the
 * step's MFU counts) over the timed seconds.
 * --against OTHER.ini times a second configuration in the same process (the same --set overrides,
 * options and batch shapes), step for step alternately with the first: step s of both runs back to
 * back, the order swapped every step. Its ratio per step pair (seconds per real token of CONFIG
 * over those of OTHER) sees the same load of a shared host on both sides, unlike runs minutes
 * apart: the overhead of a position mode measured where separate runs' timings swing by tens of
 * percent. --against-lengths-from FILE / --against-from-shards DIR give the paired side a batch source
 * of its own (its shapes then differ): e.g. SST-2 fine-tuning against pretraining at the same model,
 * real tokens/s of the two jobs under the same load. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "train/config/config.h"
#include "train/loop/peak.h"
#include "core/rng.h"
#include "core/io/files.h"
#include "layers/layers.h"
#include "train/cli/bench_sources.h"
#include "train/cli/commands.h"
#include "train/loop/finetune.h"
#include "train/loop/step.h"
#include "train/model/model.h"

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

typedef struct {
    const char *batch_text, *seq_text, *lengths_path;
    const char *shards_path; /* --from-shards DIR: pretraining's batches of the shard set DIR */
    double label_frac;
    int warmup, steps;
} BenchOptions;

/* One configuration the bench times: its model and batches, optimizer, step and timings. */
typedef struct {
    const char *config_path;
    char batch_set[64], seq_set[64];
    Config cfg;
    int B, L, M; /* M: MLM labels per batch (synthetic) */
    SyntheticBench synthetic;
    TaskBench task;
    ShardBench shards;
    CountedSource counted;
    int is_task, from_shards; /* the batch source: --lengths-from, --from-shards, else synthetic */
    TrainStep ts;
    GemmStats gemm_at_warmup; /* the counts of the model's products (its activations') before the timed steps */
    double *step_s;   /* [steps] seconds of each timed step */
    long *step_real;  /* [steps] real tokens of each timed step */
    double elapsed, cpu_elapsed, t_forward, t_backward, t_update;
} BenchSide;

static void bench_side_create(BenchSide *b, const char *config_path, CliArgs args, const BenchOptions *o,
                              Dist *dist) {
    memset(b, 0, sizeof *b);
    b->config_path = config_path;
    b->is_task = o->lengths_path != NULL, b->from_shards = o->shards_path != NULL;
    if (o->lengths_path) {
        add_task_override(&args, b->batch_set, sizeof b->batch_set, "batch_size", o->batch_text);
        add_task_override(&args, b->seq_set, sizeof b->seq_set, "max_seq_len", o->seq_text);
    }
    Config *cfg = &b->cfg;
    config_load_model(cfg, config_path, args.num_sets, args.sets);
    gemm_require_precision(cfg->train.precision, "train.precision");
    if (o->lengths_path) {
        config_validate(cfg); /* the task's keys, and [data]'s, are the bench's too */
        if (!config_key_is_set(cfg, "task", "bad_examples"))
            cfg->task.bad_examples = BAD_FATAL; /* a bench measures the file it is given, all of it */
    }
    if (cfg->train.threads > 0) /* before train_step_init's peak probes */
        omp_set_num_threads(cfg->train.threads);
    b->B = o->lengths_path ? cfg->task.batch_size
           : o->shards_path ? cfg->train.batch_size : (int)cli_int("--batch-size", o->batch_text, 1, 1 << 20);
    b->L = o->lengths_path ? cfg->task.max_seq_len
           : o->shards_path ? cfg->data.max_seq_len : (int)cli_int("--seq-len", o->seq_text, 1, 1 << 20);
    const int total = o->warmup + o->steps;
    StepConfig sc = {SCHED_CONSTANT, cfg->optim.lr, 0, total, 1, cfg->train.clip_grad_norm,
                     (uint64_t)cfg->model.seed, total + 1, NULL};
    Model *m;
    LossHead head;
    BatchSource inner;
    if (o->lengths_path) {
        task_bench_create(&b->task, cfg, o->lengths_path);
        m = &b->task.r.model;
        head = finetune_loss_head(&b->task.r);
        inner = finetune_batch_source(&b->task.batches);
        sc.peak_lr = cfg->task.lr, sc.dropout_seed = (uint64_t)cfg->task.seed;
    } else if (o->shards_path) {
        snprintf(cfg->data.shard_dir, sizeof cfg->data.shard_dir, "%s", o->shards_path);
        shard_bench_create(&b->shards, cfg);
        m = &b->shards.model;
        head = loss_head_mlm(&b->shards.acts);
        inner = shard_bench_source(&b->shards);
        b->M = mlm_max_predictions(cfg);
    } else {
        synthetic_create(&b->synthetic, cfg, b->B, b->L, o->label_frac);
        m = &b->synthetic.model;
        head = loss_head_mlm(&b->synthetic.acts);
        inner = batch_source_repeat(&b->synthetic.batch); /* the same random batch every micro-batch */
        b->M = b->synthetic.labelled;
    }
    const ModelConfig *counted_model = o->lengths_path ? &b->task.r.cfg.model : &cfg->model; /* a tagging
                                                                       * file's model has its own vocabulary */
    b->counted = (CountedSource){inner, 0, 0, xmalloc(sizeof(int) * (size_t)total), 0, total, counted_model,
                                 !o->lengths_path, 0};
    train_step_init(&b->ts, &sc, m, head, (BatchSource){next_counted, NULL, &b->counted}, &cfg->optim, dist, 0);
    train_step_begin(&b->ts, NULL, 0);
    b->ts.peak.spread_left = 0; /* no probe inside a timed step: the bench probes between steps */
    b->step_s = xmalloc(sizeof(double) * (size_t)o->steps);
    b->step_real = xmalloc(sizeof(long) * (size_t)o->steps);
}

/* Step s (timed from s = warmup on). */
static void bench_side_step(BenchSide *b, int s, int warmup) {
    if (s == warmup) { /* count the timed steps' micro-batches (and products) only */
        b->counted.real_tokens = b->counted.computed_tokens = b->counted.count = 0;
        b->counted.flops = 0;
        b->gemm_at_warmup = gemm_stats(b->ts.head.acts->gemm);
    }
    const StepPhases before = b->ts.phases;
    const long real_before = b->counted.real_tokens;
    double t0 = now_seconds(), c0 = cpu_seconds();
    train_step(&b->ts, s);
    double t1 = now_seconds(), c1 = cpu_seconds();
    if (s < warmup)
        return;
    b->step_s[s - warmup] = t1 - t0;
    b->step_real[s - warmup] = b->counted.real_tokens - real_before;
    b->elapsed += t1 - t0, b->cpu_elapsed += c1 - c0;
    b->t_forward += b->ts.phases.forward - before.forward;
    b->t_backward += b->ts.phases.backward - before.backward;
    b->t_update += b->ts.phases.update - before.update;
}

static void bench_side_free(BenchSide *b) {
    free(b->step_s), free(b->step_real), free(b->counted.lengths);
    train_step_free(&b->ts);
    if (b->is_task)
        task_bench_free(&b->task);
    else if (b->from_shards)
        shard_bench_free(&b->shards);
    else
        synthetic_free(&b->synthetic);
}

/* "fp32 (OpenBLAS)", "fp32 (OpenBLAS; gemm_small's AVX-512 kernel for alpha-1 products)" or "bf16
 * (oneDNN brg:avx512_core_bf16: 60 products per step, 0.21 s in them,
 * 0.02 s converting 12.5 M floats; attention 768 products per step, 14.5 GFLOP, 0.11 thread-s)": the
 * side's precision and its timed products per step (the attention's gemm_lane products: thread-seconds,
 * two threads run them at once). */
static void describe_precision(const BenchSide *b, int steps, char *out, size_t size) {
    const Precision precision = gemm_precision(b->ts.head.acts->gemm);
    if (precision == PRECISION_FP32) {
        snprintf(out, size, "fp32 (OpenBLAS%s)",
                 gemm_f32_on_small(1024, 1024, 1024, 1.0f) ? "; gemm_small's AVX-512 kernel for alpha-1 products" : "");
        return;
    }
    const GemmStats now = gemm_stats(b->ts.head.acts->gemm), *w = &b->gemm_at_warmup;
    snprintf(out, size, "bf16 (%s %s: %.0f products per step, %.3f s in them, %.3f s converting %.1f M floats; "
             "attention %.0f products per step, %.1f GFLOP, %.3f thread-s; %ld primitives created in the timed steps)",
             gemm_engine_name(b->ts.head.acts->gemm), now.implementation, (double)(now.products - w->products) / steps,
             (now.product_seconds - w->product_seconds) / steps, (now.convert_seconds - w->convert_seconds) / steps,
             (now.converted_floats - w->converted_floats) / steps * 1e-6,
             (double)(now.lane_products - w->lane_products) / steps, (now.lane_flops - w->lane_flops) / steps * 1e-9,
             (now.lane_seconds - w->lane_seconds) / steps, now.primitives_created - w->primitives_created);
}

static int compare_doubles(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Per step pair: (seconds per real token of a) / (that of b). Sorted copy's median, min, max. */
static void pair_ratios(const BenchSide *a, const BenchSide *b, int steps, double *ratios, double *median,
                        double *lo, double *hi) {
    double *sorted = xmalloc(sizeof(double) * (size_t)steps);
    for (int k = 0; k < steps; k++) {
        ratios[k] = (a->step_s[k] / (double)a->step_real[k]) / (b->step_s[k] / (double)b->step_real[k]);
        sorted[k] = ratios[k];
    }
    qsort(sorted, (size_t)steps, sizeof(double), compare_doubles);
    *median = steps % 2 ? sorted[steps / 2] : 0.5 * (sorted[steps / 2 - 1] + sorted[steps / 2]);
    *lo = sorted[0], *hi = sorted[steps - 1];
    free(sorted);
}

int cmd_bench(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *json_path = NULL, *steps_text = "10", *warmup_text = "2", *label_text = NULL, *against_path = NULL,
               *against_set = NULL, *against_lengths = NULL, *against_shards = NULL, *probes_text = "every-step";
    BenchOptions o = {0};
    CliOption options[] = {{"batch-size", &o.batch_text}, {"seq-len", &o.seq_text},     {"steps", &steps_text},
                           {"warmup", &warmup_text},      {"label-frac", &label_text}, {"json", &json_path},
                           {"lengths-from", &o.lengths_path}, {"against", &against_path},
                           {"against-set", &against_set}, {"from-shards", &o.shards_path},
                           {"against-lengths-from", &against_lengths}, {"against-from-shards", &against_shards},
                           {"probes", &probes_text}};
    CliArgs args = cli_parse(argc, argv, options, 13);
    RP_CHECK(args.num_positional == 1 && (o.lengths_path || o.shards_path || (o.batch_text && o.seq_text)),
             "usage: realpos %s", usage);
    RP_CHECK(!(o.lengths_path && o.shards_path), "--lengths-from and --from-shards are two batch sources: give one; "
             "usage: realpos %s", usage);
    RP_CHECK(!(o.lengths_path && label_text), "--label-frac sets the MLM labels of the synthetic batch; with "
             "--lengths-from the step trains the task's head; usage: realpos %s", usage);
    RP_CHECK(!strcmp(probes_text, "every-step") || !strcmp(probes_text, "start"), "option '--probes': expected "
             "every-step or start, got '%s'", probes_text);
    const int probe_every_step = !strcmp(probes_text, "every-step");
    o.steps = (int)cli_int("--steps", steps_text, 1, 1 << 20), o.warmup = (int)cli_int("--warmup", warmup_text, 0, 1 << 20);
    o.label_frac = 0.15;
    if (label_text) {
        RP_CHECK(parse_decimal(label_text, &o.label_frac) && o.label_frac >= 0 && o.label_frac <= 1,
                 "option '--label-frac': expected a number in [0, 1], got '%s'", label_text);
    }
    const int steps = o.steps, warmup = o.warmup;
    const char *lengths_path = o.lengths_path, *shards_path = o.shards_path;
    Dist dist;
    dist_init(&dist, NULL, NULL);
    BenchSide side, other;
    CpuBf16 cpu_bf16 = cpu_bf16_query();
    char bf16_line[160];
    cpu_bf16_describe(&cpu_bf16, bf16_line, sizeof bf16_line);
    printf("bench: %s\n", bf16_line);
    bench_side_create(&side, args.positional[0], args, &o, &dist);
    const Config *cfg = &side.cfg;
    RP_CHECK(!(against_lengths && against_shards), "--against-lengths-from and --against-from-shards are two batch "
             "sources for the paired side: give one; usage: realpos %s", usage);
    BenchOptions other_o = o; /* the paired side's batch source: the first side's unless given */
    if (against_lengths)
        other_o.lengths_path = against_lengths, other_o.shards_path = NULL;
    if (against_shards)
        other_o.shards_path = against_shards, other_o.lengths_path = NULL;
    const int own_source = against_lengths || against_shards;
    if (own_source && !against_path && !against_set) /* a source alone: the same config, other batches */
        against_path = args.positional[0];
    if (against_set && !against_path) /* --against-set alone: the same config with one setting changed */
        against_path = args.positional[0];
    if (against_path) {
        CliArgs other_args = args;
        if (against_set) { /* e.g. train.precision=fp32: applied to the paired side only, after the --sets */
            RP_CHECK(other_args.num_sets < CLI_MAX_SETS, "too many --set options with --against-set (at most %d)",
                     CLI_MAX_SETS - 1);
            other_args.sets[other_args.num_sets++] = (char *)against_set;
        }
        bench_side_create(&other, against_path, other_args, &other_o, &dist);
        RP_CHECK(other.cfg.train.threads == cfg->train.threads, "--against %s: train.threads is %d there and %d in %s: "
                 "the two sides of a pair must run on the same threads", against_path, other.cfg.train.threads,
                 cfg->train.threads, args.positional[0]);
        RP_CHECK(own_source || (other.B == side.B && other.L == side.L), "--against %s: batches of %d x %d there, %d x %d in %s: the "
                 "two sides of a pair time the same shapes", against_path, other.B, other.L, side.B, side.L,
                 args.positional[0]);
    }
    const int B = side.B, L = side.L, M = side.M;

    /* The side's peak (its precision's: train/loop/peak.h), and both precisions' probes for the JSON:
     * the sgemm peak always (a bf16 side's own estimate besides its step's), the bf16 one when a
     * side runs bf16 (that side's), each probed after every step pair. */
    PeakEstimate *peak = &side.ts.peak, sgemm_alone, *sgemm = peak, *bf16_peak = NULL;
    if (peak->precision == PRECISION_BF16) {
        bf16_peak = peak;
        sgemm_alone = peak_estimate(omp_get_max_threads());
        sgemm = &sgemm_alone;
    } else if (against_path && other.ts.peak.precision == PRECISION_BF16) {
        bf16_peak = &other.ts.peak;
    }
    const int any_bf16 = bf16_peak != NULL;
    double *probes = xmalloc(sizeof(double) * (size_t)(steps + 1)),
           *bf16_probes = xmalloc(sizeof(double) * (size_t)(steps + 1));
    int num_probes = 0, num_bf16_probes = 0;
    probes[num_probes++] = sgemm->probe_gflops;
    if (bf16_peak)
        bf16_probes[num_bf16_probes++] = bf16_peak->probe_gflops;
    for (int s = 0; s < warmup + steps; s++) {
        /* --against: both configurations take step s back to back, alternating which goes first, so
         * that a shared host's load meets both alike and neither always follows the probe */
        BenchSide *first = &side, *second = against_path ? &other : NULL;
        if (against_path && s % 2)
            first = &other, second = &side;
        bench_side_step(first, s, warmup);
        if (second)
            bench_side_step(second, s, warmup);
        if (s >= warmup && probe_every_step)
            probes[num_probes++] = peak_probe(sgemm);
        if (s >= warmup && probe_every_step && bf16_peak)
            bf16_probes[num_bf16_probes++] = peak_probe(bf16_peak);
    }
    const CountedSource counted = side.counted;
    const double elapsed = side.elapsed, cpu_elapsed = side.cpu_elapsed;
    const double flops = counted.flops;
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
    const char *task_name = cfg->task.type == TASK_SQUAD ? "squad" : glue_task_name(cfg->task.glue_task);
    if (lengths_path) {
        printf("bench: fine-tuning %s on %s: %d sequences of %.1f tokens on average (at most %d), batches of %d "
               "%s%s; the timed batches: %.1f real tokens per sequence, computed %.1f\n", task_name,
               lengths_path, side.task.data.features.count, side.task.mean_length, L, B,
               cfg->task.padding == PAD_NONE      ? "unpadded"
               : cfg->task.padding == PAD_LONGEST ? "padded to their longest sequence"
                                                  : "padded to task.max_seq_len",
               cfg->task.group_by_length ? ", grouped by length" : "",
               (double)counted.real_tokens / ((double)B * counted.count), mean_padded);
        snprintf(tokens_text, sizeof tokens_text, "%.1f real tokens/s (%.1f computed: B x padded length)",
                 real_tokens_per_s, tokens_per_s);
    } else {
        snprintf(tokens_text, sizeof tokens_text, "%.1f tokens/s", tokens_per_s);
    }
    printf("realpos: %d threads, %s, %.1f GFLOP/s (%.0f%% of the %s peak %.1f from the %s; this run's %d "
           "probes best %.1f), "
           "peak RSS %.0f MB%s; per step: forward %.3f s, backward %.3f s, reduce+clip+AdamW %.3f s, CPU %.3f s; "
           "%s, OpenBLAS core %s%s%s\n",
           omp_get_max_threads(), tokens_text, gflops, 100.0 * fraction, precision_names[peak->precision], peak->gflops,
           peak->source, peak->probes,
           peak->probe_gflops,
           rss_mb, against_path ? " (the process: both sides of the pair)" : "", side.t_forward / steps,
           side.t_backward / steps, side.t_update / steps, cpu_elapsed / steps,
           cpu_model, blas_core_name(), coretype ? ", OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    char precision_text[384], other_precision[384] = "";
    describe_precision(&side, steps, precision_text, sizeof precision_text);
    printf("precision: %s\n", precision_text);
    char peak_text[4608];
    peak_describe(peak, peak_text, sizeof peak_text);
    printf("peak: %s\n", peak_text);
    if (bf16_peak && bf16_peak != peak) {
        peak_describe(bf16_peak, peak_text, sizeof peak_text);
        printf("paired side's peak: %s\n", peak_text);
    }
    double products_gflops = 0; /* bf16: the step's bf16 products' own rate (their FLOPs over their seconds) */
    if (peak->precision == PRECISION_BF16) {
        const GemmStats now = gemm_stats(side.ts.head.acts->gemm), *w = &side.gemm_at_warmup;
        const double seconds = now.product_seconds - w->product_seconds, done = now.product_flops - w->product_flops;
        products_gflops = seconds > 0 ? done / seconds * 1e-9 : 0;
        printf("bf16: the step's bf16 products: %.1f GFLOP per step in %.3f s, %.1f GFLOP/s (%.0f%% of the bf16 peak; "
               "%.0f%% of the step's time), shared in %s; the peak's probes allocated %.1f MB of operands (0: they "
               "ran in the step's activations)\n", done / steps * 1e-9, seconds / steps, products_gflops,
               100.0 * products_gflops / peak->gflops, 100.0 * seconds / elapsed,
               gemm_blocks_by_threads(side.ts.head.acts->gemm) ? "one block a thread" : "the blocks fixed by the shape",
               (double)side.ts.peak_bf16.own_bytes_max / (1024.0 * 1024.0));
    }
    double *ratios = xmalloc(sizeof(double) * (size_t)steps), ratio = 0, ratio_lo = 0, ratio_hi = 0;
    if (against_path) {
        describe_precision(&other, steps, other_precision, sizeof other_precision);
        printf("paired side%s%s: precision %s\n", against_set ? " --against-set " : "", against_set ? against_set : "",
               other_precision);
        pair_ratios(&side, &other, steps, ratios, &ratio, &ratio_lo, &ratio_hi);
        printf("paired side: %.1f real tokens/s; per step: forward %.3f s, backward %.3f s, reduce+clip+AdamW %.3f s, "
               "CPU %.3f s\n", (double)other.counted.real_tokens / other.elapsed, other.t_forward / steps,
               other.t_backward / steps, other.t_update / steps, other.cpu_elapsed / steps);
        char mine[CONFIG_PATH_MAX + 40], theirs[CONFIG_PATH_MAX + 40]; /* a config, and its source if they differ */
        snprintf(mine, sizeof mine, "%s%s%s", args.positional[0], own_source ? " on " : "",
                 own_source ? (lengths_path ? lengths_path : shards_path ? shards_path : "synthetic batches") : "");
        snprintf(theirs, sizeof theirs, "%s%s%s", against_path, own_source ? " on " : "",
                 own_source ? (against_lengths ? against_lengths : against_shards) : "");
        printf("paired with %s (%.3f s per step, %ld real tokens): per step pair, seconds per real token of %s "
               "over those of %s: median %.4f [%.4f..%.4f] over %d pairs, i.e. %+.1f%%\n",
               theirs, other.elapsed / steps, other.counted.real_tokens, mine, theirs,
               ratio, ratio_lo, ratio_hi, steps, 100.0 * (ratio - 1.0));
    }
    if (json_path) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "impl", "realpos");
        cJSON_AddNumberToObject(o, "threads", omp_get_max_threads());
        cJSON_AddStringToObject(o, "precision", precision_names[cfg->train.precision]);
        cJSON_AddStringToObject(o, "precision_detail", precision_text);
        cJSON_AddBoolToObject(o, "bf16_available", cpu_bf16_available(&cpu_bf16));
        if (any_bf16)
            cJSON_AddItemToObject(o, "bf16_probes_gflops", cJSON_CreateDoubleArray(bf16_probes, num_bf16_probes));
        else
            cJSON_AddNullToObject(o, "bf16_probes_gflops");
        cJSON_AddStringToObject(o, "bf16", bf16_line);
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
        if (shards_path)
            cJSON_AddStringToObject(o, "data_padding", padding_kind_name(cfg->data.padding));
        if (lengths_path) {
            cJSON *ft = cJSON_AddObjectToObject(o, "finetune");
            cJSON_AddStringToObject(ft, "file", lengths_path);
            cJSON_AddStringToObject(ft, "task", task_name);
            cJSON_AddNumberToObject(ft, "sequences", side.task.data.features.count);
            cJSON_AddNumberToObject(ft, "mean_length", side.task.mean_length);
            cJSON_AddStringToObject(ft, "padding", padding_kind_name(cfg->task.padding));
            cJSON_AddBoolToObject(ft, "group_by_length", cfg->task.group_by_length);
        } else {
            cJSON_AddNullToObject(o, "finetune");
        }
        cJSON_AddNumberToObject(o, "gflops", gflops);
        cJSON_AddNumberToObject(o, "sgemm_peak_gflops", sgemm->probe_gflops); /* the best of probes[] */
        cJSON_AddNumberToObject(o, "peak_gflops", peak->gflops);
        cJSON_AddStringToObject(o, "peak_precision", precision_names[peak->precision]);
        cJSON_AddStringToObject(o, "peak_source", peak->source);
        cJSON_AddNumberToObject(o, "peak_fraction", fraction);
        if (peak->precision == PRECISION_BF16) {
            cJSON_AddNumberToObject(o, "bf16_products_gflops", products_gflops);
            /* the most bytes of operands one of the bf16 peak's probes allocated (0: all borrowed) */
            cJSON_AddNumberToObject(o, "bf16_probe_own_bytes", (double)side.ts.peak_bf16.own_bytes_max);
        } else {
            cJSON_AddNullToObject(o, "bf16_products_gflops");
            cJSON_AddNullToObject(o, "bf16_probe_own_bytes");
        }
        cJSON_AddItemToObject(o, "sgemm_probes_gflops", cJSON_CreateDoubleArray(probes, num_probes));
        cJSON_AddItemToObject(o, "step_seconds", cJSON_CreateDoubleArray(side.step_s, steps));
        cJSON *step_real = cJSON_AddArrayToObject(o, "step_real_tokens"); /* the shapes bench_peer.py repeats */
        for (int s = 0; s < steps; s++)
            cJSON_AddItemToArray(step_real, cJSON_CreateNumber((double)side.step_real[s]));
        cJSON_AddNumberToObject(o, "peak_rss_mb", rss_mb); /* the process's: both sides when paired */
        cJSON_AddNumberToObject(o, "seconds_per_step", elapsed / steps);
        cJSON_AddNumberToObject(o, "cpu_seconds_per_step", cpu_elapsed / steps);
        cJSON_AddNumberToObject(o, "forward_s", side.t_forward / steps);
        cJSON_AddNumberToObject(o, "backward_s", side.t_backward / steps);
        cJSON_AddNumberToObject(o, "update_s", side.t_update / steps);
        if (against_path) {
            cJSON *pair = cJSON_AddObjectToObject(o, "paired");
            cJSON_AddStringToObject(pair, "against", against_path);
            if (against_set)
                cJSON_AddStringToObject(pair, "against_set", against_set);
            if (against_lengths || against_shards) /* the paired side's own batch source */
                cJSON_AddStringToObject(pair, against_lengths ? "lengths_from" : "from_shards",
                                        against_lengths ? against_lengths : against_shards);
            cJSON_AddStringToObject(pair, "precision", precision_names[other.cfg.train.precision]);
            cJSON_AddStringToObject(pair, "precision_detail", other_precision);
            cJSON_AddItemToObject(pair, "step_seconds", cJSON_CreateDoubleArray(other.step_s, steps));
            cJSON_AddNumberToObject(pair, "seconds_per_step", other.elapsed / steps);
            cJSON_AddNumberToObject(pair, "real_tokens", (double)other.counted.real_tokens);
            cJSON_AddItemToObject(pair, "ratios", cJSON_CreateDoubleArray(ratios, steps));
            cJSON_AddNumberToObject(pair, "ratio_median", ratio);
        } else {
            cJSON_AddNullToObject(o, "paired");
        }
        cJSON_AddStringToObject(o, "cpu_model", cpu_model);
        cJSON_AddStringToObject(o, "openblas_corename", blas_core_name());
        const char *wait_policy = getenv("OMP_WAIT_POLICY"); /* realpos sets PASSIVE unless given (main.c) */
        if (wait_policy)
            cJSON_AddStringToObject(o, "omp_wait_policy", wait_policy);
        else
            cJSON_AddNullToObject(o, "omp_wait_policy");
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
    free(probes), free(bf16_probes), free(ratios);
    if (against_path)
        bench_side_free(&other);
    bench_side_free(&side);
    dist_finalize(&dist);
    return 0;
}
