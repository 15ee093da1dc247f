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
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "train/cli/bench_side.h"
#include "train/cli/bench_sources.h"
#include "train/cli/commands.h"
#include "train/config/config.h"
#include "train/loop/peak.h"
#include "train/loop/step.h"

/* What the command line asks for. */
typedef struct {
    CliArgs args;
    BenchOptions o;
    const char *usage, *json_path;
    const char *against_path, *against_set, *against_lengths, *against_shards; /* the paired side, if any */
    int own_source;       /* the paired side reads batches of its own (--against-lengths-from / -from-shards) */
    int probe_every_step; /* --probes every-step (else start) */
} BenchArgs;

/* The run: its sides, the peaks they are measured against and the probes taken between steps. */
typedef struct {
    BenchSide side, other; /* other: the paired side (against_path) */
    CpuBf16 cpu_bf16;
    char bf16_line[160];
    /* side's peak (its precision's: train/loop/peak.h); the sgemm one always (a bf16 side's own
     * estimate besides its step's) and the bf16 one when a side runs bf16 (that side's), for the JSON */
    PeakEstimate *peak, sgemm_alone, *sgemm, *bf16_peak;
    double *probes, *bf16_probes; /* [steps + 1]: at start-up, then after every step (pair) */
    int num_probes, num_bf16_probes;
} BenchRun;

/* What the report prints and writes, worked out once. */
typedef struct {
    double tokens_per_s, real_tokens_per_s, gflops, fraction, rss_mb;
    double products_gflops, products_flops, products_seconds; /* bf16: the step's bf16 products, per run */
    char cpu_model[256], precision_text[384], other_precision[384];
    const char *coretype, *task_name;
    double *ratios, ratio, ratio_lo, ratio_hi; /* paired: per step pair, and their median, min, max */
} BenchFigures;

static void parse_args(BenchArgs *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->usage = command_usage(argv[0]);
    const char *usage = a->usage, *steps_text = "10", *warmup_text = "2", *label_text = NULL,
               *probes_text = "every-step";
    BenchOptions *o = &a->o;
    CliOption options[] = {{"batch-size", &o->batch_text}, {"seq-len", &o->seq_text}, {"steps", &steps_text},
                           {"warmup", &warmup_text}, {"label-frac", &label_text}, {"json", &a->json_path},
                           {"lengths-from", &o->lengths_path}, {"against", &a->against_path},
                           {"against-set", &a->against_set}, {"from-shards", &o->shards_path},
                           {"against-lengths-from", &a->against_lengths},
                           {"against-from-shards", &a->against_shards}, {"probes", &probes_text}};
    a->args = cli_parse(argc, argv, options, 13);
    RP_CHECK(a->args.num_positional == 1 && (o->lengths_path || o->shards_path || (o->batch_text && o->seq_text)),
             "usage: realpos %s", usage);
    RP_CHECK(!(o->lengths_path && o->shards_path), "--lengths-from and --from-shards are two batch sources: give one; "
             "usage: realpos %s", usage);
    RP_CHECK(!(o->lengths_path && label_text), "--label-frac sets the MLM labels of the synthetic batch; with "
             "--lengths-from the step trains the task's head; usage: realpos %s", usage);
    RP_CHECK(!strcmp(probes_text, "every-step") || !strcmp(probes_text, "start"), "option '--probes': expected "
             "every-step or start, got '%s'", probes_text);
    a->probe_every_step = !strcmp(probes_text, "every-step");
    o->steps = (int)cli_int("--steps", steps_text, 1, 1 << 20);
    o->warmup = (int)cli_int("--warmup", warmup_text, 0, 1 << 20);
    o->label_frac = 0.15;
    if (label_text) {
        RP_CHECK(parse_decimal(label_text, &o->label_frac) && o->label_frac >= 0 && o->label_frac <= 1,
                 "option '--label-frac': expected a number in [0, 1], got '%s'", label_text);
    }
    /* every path read and the JSON written, checked before any work (core/io/paths.h): the JSON a
     * regular file or new (the rename of its atomic write would replace a device or FIFO), its
     * folder writable, and no input */
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, a->args.positional[0], "config");
    if (a->against_path)
        io_plan_input(&plan, a->against_path, "--against");
    if (o->lengths_path)
        io_plan_input(&plan, o->lengths_path, "--lengths-from");
    if (a->against_lengths)
        io_plan_input(&plan, a->against_lengths, "--against-lengths-from");
    if (o->shards_path)
        io_plan_input_dir(&plan, o->shards_path, "--from-shards");
    if (a->against_shards)
        io_plan_input_dir(&plan, a->against_shards, "--against-from-shards");
    if (a->json_path)
        io_plan_output(&plan, a->json_path, "--json");
    io_plan_check(&plan);
}

/* The sides (the paired one with --against, --against-set or a batch source of its own), their
 * peaks and the probe lists. */
static void open_sides(BenchRun *r, BenchArgs *a, Dist *dist) {
    memset(r, 0, sizeof *r);
    const char *usage = a->usage, *config = a->args.positional[0];
    r->cpu_bf16 = cpu_bf16_query();
    cpu_bf16_describe(&r->cpu_bf16, r->bf16_line, sizeof r->bf16_line);
    printf("bench: %s\n", r->bf16_line);
    BenchSide *side = &r->side, *other = &r->other;
    bench_side_create(side, config, a->args, &a->o, dist);
    RP_CHECK(!(a->against_lengths && a->against_shards), "--against-lengths-from and --against-from-shards are two "
             "batch sources for the paired side: give one; usage: realpos %s", usage);
    BenchOptions other_o = a->o; /* the paired side's batch source: the first side's unless given */
    if (a->against_lengths)
        other_o.lengths_path = a->against_lengths, other_o.shards_path = NULL;
    if (a->against_shards)
        other_o.shards_path = a->against_shards, other_o.lengths_path = NULL;
    a->own_source = a->against_lengths || a->against_shards;
    if (a->own_source && !a->against_path && !a->against_set) /* a source alone: the same config, other batches */
        a->against_path = config;
    if (a->against_set && !a->against_path) /* --against-set alone: the same config with one setting changed */
        a->against_path = config;
    if (a->against_path) {
        CliArgs other_args = a->args;
        if (a->against_set) { /* e.g. train.precision=fp32: applied to the paired side only, after the --sets */
            RP_CHECK(other_args.num_sets < CLI_MAX_SETS, "too many --set options with --against-set (at most %d)",
                     CLI_MAX_SETS - 1);
            other_args.sets[other_args.num_sets++] = (char *)a->against_set;
        }
        bench_side_create(other, a->against_path, other_args, &other_o, dist);
        RP_CHECK(other->cfg.train.threads == side->cfg.train.threads, "--against %s: train.threads is %d there and "
                 "%d in %s: the two sides of a pair must run on the same threads", a->against_path,
                 other->cfg.train.threads, side->cfg.train.threads, config);
        RP_CHECK(a->own_source || (other->B == side->B && other->L == side->L), "--against %s: batches of %d x %d "
                 "there, %d x %d in %s: the two sides of a pair time the same shapes", a->against_path, other->B,
                 other->L, side->B, side->L, config);
    }
    r->peak = &side->ts.peak, r->sgemm = r->peak;
    if (r->peak->precision == PRECISION_BF16) {
        r->bf16_peak = r->peak;
        r->sgemm_alone = peak_estimate(omp_get_max_threads());
        r->sgemm = &r->sgemm_alone;
    } else if (a->against_path && other->ts.peak.precision == PRECISION_BF16) {
        r->bf16_peak = &other->ts.peak;
    }
    r->probes = xmalloc(sizeof(double) * (size_t)(a->o.steps + 1));
    r->bf16_probes = xmalloc(sizeof(double) * (size_t)(a->o.steps + 1));
    r->probes[r->num_probes++] = r->sgemm->probe_gflops;
    if (r->bf16_peak)
        r->bf16_probes[r->num_bf16_probes++] = r->bf16_peak->probe_gflops;
}

/* The warm-up and timed steps; with --probes every-step, both peaks probed after each timed step
 * (pair). With a paired side, both configurations take step s back to back, alternating which goes
 * first, so that a shared host's load meets both alike and neither always follows the probe. */
static void run_steps(BenchRun *r, const BenchArgs *a) {
    const int warmup = a->o.warmup;
    for (int s = 0; s < warmup + a->o.steps; s++) {
        BenchSide *first = &r->side, *second = a->against_path ? &r->other : NULL;
        if (a->against_path && s % 2)
            first = &r->other, second = &r->side;
        bench_side_step(first, s, warmup);
        if (second)
            bench_side_step(second, s, warmup);
        if (s >= warmup && a->probe_every_step)
            r->probes[r->num_probes++] = peak_probe(r->sgemm);
        if (s >= warmup && a->probe_every_step && r->bf16_peak)
            r->bf16_probes[r->num_bf16_probes++] = peak_probe(r->bf16_peak);
    }
}

static void work_out_figures(BenchFigures *f, const BenchRun *r, const BenchArgs *a) {
    memset(f, 0, sizeof *f);
    const BenchSide *side = &r->side;
    const int steps = a->o.steps;
    const Config *cfg = &side->cfg;
    f->tokens_per_s = (double)side->counted.computed_tokens / side->elapsed;
    f->real_tokens_per_s = (double)side->counted.real_tokens / side->elapsed;
    f->gflops = side->counted.flops / side->elapsed * 1e-9;
    f->fraction = peak_utilisation(r->peak, f->gflops); /* fp32: raises the peak to this rate if it is faster */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    f->rss_mb = (double)ru.ru_maxrss / 1024.0;
    cpu_model_name(f->cpu_model, sizeof f->cpu_model);
    f->coretype = getenv("OPENBLAS_CORETYPE");
    f->task_name = cfg->task.type == TASK_SQUAD ? "squad" : glue_task_name(cfg->task.glue_task);
    bench_side_describe_precision(side, steps, f->precision_text, sizeof f->precision_text);
    if (r->peak->precision == PRECISION_BF16) { /* their FLOPs over their seconds */
        const GemmStats now = gemm_stats(side->ts.head.acts->gemm), *w = &side->gemm_at_warmup;
        f->products_seconds = now.product_seconds - w->product_seconds;
        f->products_flops = now.product_flops - w->product_flops;
        f->products_gflops = f->products_seconds > 0 ? f->products_flops / f->products_seconds * 1e-9 : 0;
    }
    f->ratios = xmalloc(sizeof(double) * (size_t)steps);
    if (a->against_path) {
        bench_side_describe_precision(&r->other, steps, f->other_precision, sizeof f->other_precision);
        bench_pair_ratios(side, &r->other, steps, f->ratios, &f->ratio, &f->ratio_lo, &f->ratio_hi);
    }
}

static void print_report(const BenchFigures *f, const BenchRun *r, const BenchArgs *a) {
    const BenchSide *side = &r->side, *other = &r->other;
    const Config *cfg = &side->cfg;
    const CountedSource *counted = &side->counted;
    const PeakEstimate *peak = r->peak;
    const int steps = a->o.steps, B = side->B;
    const char *lengths_path = a->o.lengths_path, *shards_path = a->o.shards_path;
    char tokens_text[160];
    if (lengths_path) {
        printf("bench: fine-tuning %s on %s: %d sequences of %.1f tokens on average (at most %d), batches of %d "
               "%s%s; the timed batches: %.1f real tokens per sequence, computed %.1f\n", f->task_name,
               lengths_path, side->task.data.features.count, side->task.mean_length, side->L, B,
               cfg->task.padding == PAD_NONE      ? "unpadded"
               : cfg->task.padding == PAD_LONGEST ? "padded to their longest sequence"
                                                  : "padded to task.max_seq_len",
               cfg->task.group_by_length ? ", grouped by length" : "",
               (double)counted->real_tokens / ((double)B * counted->count),
               (double)counted->computed_tokens / ((double)B * counted->count));
        snprintf(tokens_text, sizeof tokens_text, "%.1f real tokens/s (%.1f computed: B x padded length)",
                 f->real_tokens_per_s, f->tokens_per_s);
    } else {
        snprintf(tokens_text, sizeof tokens_text, "%.1f tokens/s", f->tokens_per_s);
    }
    printf("realpos: %d threads, %s, %.1f GFLOP/s (%.0f%% of the %s peak %.1f from the %s; this run's %d "
           "probes best %.1f), "
           "peak RSS %.0f MB%s; per step: forward %.3f s, backward %.3f s, reduce+clip+AdamW %.3f s, CPU %.3f s; "
           "%s, OpenBLAS core %s%s%s\n",
           omp_get_max_threads(), tokens_text, f->gflops, 100.0 * f->fraction, precision_names[peak->precision],
           peak->gflops, peak->source, peak->probes, peak->probe_gflops, f->rss_mb,
           a->against_path ? " (the process: both sides of the pair)" : "", side->t_forward / steps,
           side->t_backward / steps, side->t_update / steps, side->cpu_elapsed / steps, f->cpu_model,
           blas_core_name(), f->coretype ? ", OPENBLAS_CORETYPE=" : "", f->coretype ? f->coretype : "");
    printf("precision: %s\n", f->precision_text);
    char peak_text[4608];
    peak_describe(peak, peak_text, sizeof peak_text);
    printf("peak: %s\n", peak_text);
    if (r->bf16_peak && r->bf16_peak != peak) {
        peak_describe(r->bf16_peak, peak_text, sizeof peak_text);
        printf("paired side's peak: %s\n", peak_text);
    }
    if (peak->precision == PRECISION_BF16)
        printf("bf16: the step's bf16 products: %.1f GFLOP per step in %.3f s, %.1f GFLOP/s (%.0f%% of the bf16 peak; "
               "%.0f%% of the step's time), shared in %s; the peak's probes allocated %.1f MB of operands (0: they "
               "ran in the step's activations)\n", f->products_flops / steps * 1e-9, f->products_seconds / steps,
               f->products_gflops, 100.0 * f->products_gflops / peak->gflops,
               100.0 * f->products_seconds / side->elapsed,
               gemm_blocks_by_threads(side->ts.head.acts->gemm) ? "one block a thread" : "the blocks fixed by the shape",
               (double)side->ts.peak_bf16.own_bytes_max / (1024.0 * 1024.0));
    if (!a->against_path)
        return;
    printf("paired side%s%s: precision %s\n", a->against_set ? " --against-set " : "",
           a->against_set ? a->against_set : "", f->other_precision);
    printf("paired side: %.1f real tokens/s; per step: forward %.3f s, backward %.3f s, reduce+clip+AdamW %.3f s, "
           "CPU %.3f s\n", (double)other->counted.real_tokens / other->elapsed, other->t_forward / steps,
           other->t_backward / steps, other->t_update / steps, other->cpu_elapsed / steps);
    char mine[CONFIG_PATH_MAX + 40], theirs[CONFIG_PATH_MAX + 40]; /* a config, and its source if they differ */
    snprintf(mine, sizeof mine, "%s%s%s", a->args.positional[0], a->own_source ? " on " : "",
             a->own_source ? (lengths_path ? lengths_path : shards_path ? shards_path : "synthetic batches") : "");
    snprintf(theirs, sizeof theirs, "%s%s%s", a->against_path, a->own_source ? " on " : "",
             a->own_source ? (a->against_lengths ? a->against_lengths : a->against_shards) : "");
    printf("paired with %s (%.3f s per step, %ld real tokens): per step pair, seconds per real token of %s "
           "over those of %s: median %.4f [%.4f..%.4f] over %d pairs, i.e. %+.1f%%\n",
           theirs, other->elapsed / steps, other->counted.real_tokens, mine, theirs, f->ratio, f->ratio_lo,
           f->ratio_hi, steps, 100.0 * (f->ratio - 1.0));
}

/* A JSON string, or null for NULL. */
static void add_string_or_null(cJSON *o, const char *key, const char *value) {
    if (value)
        cJSON_AddStringToObject(o, key, value);
    else
        cJSON_AddNullToObject(o, key);
}

static void write_json(const char *path, const BenchFigures *f, const BenchRun *r, const BenchArgs *a) {
    const BenchSide *side = &r->side, *other = &r->other;
    const Config *cfg = &side->cfg;
    const CountedSource *counted = &side->counted;
    const PeakEstimate *peak = r->peak;
    const int steps = a->o.steps;
    const char *lengths_path = a->o.lengths_path;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "impl", "realpos");
    cJSON_AddNumberToObject(o, "threads", omp_get_max_threads());
    cJSON_AddStringToObject(o, "precision", precision_names[cfg->train.precision]);
    cJSON_AddStringToObject(o, "precision_detail", f->precision_text);
    cJSON_AddBoolToObject(o, "bf16_available", cpu_bf16_available(&r->cpu_bf16));
    if (r->bf16_peak)
        cJSON_AddItemToObject(o, "bf16_probes_gflops", cJSON_CreateDoubleArray(r->bf16_probes, r->num_bf16_probes));
    else
        cJSON_AddNullToObject(o, "bf16_probes_gflops");
    cJSON_AddStringToObject(o, "bf16", r->bf16_line);
    cJSON_AddNumberToObject(o, "batch_size", side->B);
    cJSON_AddNumberToObject(o, "seq_len", side->L); /* --lengths-from: the cap, task.max_seq_len */
    cJSON_AddNumberToObject(o, "steps", steps);
    cJSON_AddNumberToObject(o, "labelled", side->M);
    cJSON_AddNumberToObject(o, "tokens_per_s", f->tokens_per_s); /* computed */
    cJSON_AddNumberToObject(o, "computed_tokens_per_s", f->tokens_per_s);
    cJSON_AddNumberToObject(o, "real_tokens_per_s", f->real_tokens_per_s);
    cJSON_AddNumberToObject(o, "computed_tokens", (double)counted->computed_tokens);
    cJSON_AddNumberToObject(o, "real_tokens", (double)counted->real_tokens);
    cJSON_AddItemToObject(o, "batch_lengths", cJSON_CreateIntArray(counted->lengths, counted->count));
    if (a->o.shards_path)
        cJSON_AddStringToObject(o, "data_padding", padding_kind_name(cfg->data.padding));
    if (lengths_path) {
        cJSON *ft = cJSON_AddObjectToObject(o, "finetune");
        cJSON_AddStringToObject(ft, "file", lengths_path);
        cJSON_AddStringToObject(ft, "task", f->task_name);
        cJSON_AddNumberToObject(ft, "sequences", side->task.data.features.count);
        cJSON_AddNumberToObject(ft, "mean_length", side->task.mean_length);
        cJSON_AddStringToObject(ft, "padding", padding_kind_name(cfg->task.padding));
        cJSON_AddBoolToObject(ft, "group_by_length", cfg->task.group_by_length);
    } else {
        cJSON_AddNullToObject(o, "finetune");
    }
    cJSON_AddNumberToObject(o, "gflops", f->gflops);
    cJSON_AddNumberToObject(o, "sgemm_peak_gflops", r->sgemm->probe_gflops); /* the best of probes[] */
    cJSON_AddNumberToObject(o, "peak_gflops", peak->gflops);
    cJSON_AddStringToObject(o, "peak_precision", precision_names[peak->precision]);
    cJSON_AddStringToObject(o, "peak_source", peak->source);
    cJSON_AddNumberToObject(o, "peak_fraction", f->fraction);
    if (peak->precision == PRECISION_BF16) {
        cJSON_AddNumberToObject(o, "bf16_products_gflops", f->products_gflops);
        /* the most bytes of operands one of the bf16 peak's probes allocated (0: all borrowed) */
        cJSON_AddNumberToObject(o, "bf16_probe_own_bytes", (double)side->ts.peak_bf16.own_bytes_max);
    } else {
        cJSON_AddNullToObject(o, "bf16_products_gflops");
        cJSON_AddNullToObject(o, "bf16_probe_own_bytes");
    }
    cJSON_AddItemToObject(o, "sgemm_probes_gflops", cJSON_CreateDoubleArray(r->probes, r->num_probes));
    cJSON_AddItemToObject(o, "step_seconds", cJSON_CreateDoubleArray(side->step_s, steps));
    cJSON *step_real = cJSON_AddArrayToObject(o, "step_real_tokens"); /* the shapes bench_peer.py repeats */
    for (int s = 0; s < steps; s++)
        cJSON_AddItemToArray(step_real, cJSON_CreateNumber((double)side->step_real[s]));
    cJSON_AddNumberToObject(o, "peak_rss_mb", f->rss_mb); /* the process's: both sides when paired */
    cJSON_AddNumberToObject(o, "seconds_per_step", side->elapsed / steps);
    cJSON_AddNumberToObject(o, "cpu_seconds_per_step", side->cpu_elapsed / steps);
    cJSON_AddNumberToObject(o, "forward_s", side->t_forward / steps);
    cJSON_AddNumberToObject(o, "backward_s", side->t_backward / steps);
    cJSON_AddNumberToObject(o, "update_s", side->t_update / steps);
    if (a->against_path) {
        cJSON *pair = cJSON_AddObjectToObject(o, "paired");
        cJSON_AddStringToObject(pair, "against", a->against_path);
        if (a->against_set)
            cJSON_AddStringToObject(pair, "against_set", a->against_set);
        if (a->own_source) /* the paired side's own batch source */
            cJSON_AddStringToObject(pair, a->against_lengths ? "lengths_from" : "from_shards",
                                    a->against_lengths ? a->against_lengths : a->against_shards);
        cJSON_AddStringToObject(pair, "precision", precision_names[other->cfg.train.precision]);
        cJSON_AddStringToObject(pair, "precision_detail", f->other_precision);
        cJSON_AddItemToObject(pair, "step_seconds", cJSON_CreateDoubleArray(other->step_s, steps));
        cJSON_AddNumberToObject(pair, "seconds_per_step", other->elapsed / steps);
        cJSON_AddNumberToObject(pair, "real_tokens", (double)other->counted.real_tokens);
        cJSON_AddItemToObject(pair, "ratios", cJSON_CreateDoubleArray(f->ratios, steps));
        cJSON_AddNumberToObject(pair, "ratio_median", f->ratio);
    } else {
        cJSON_AddNullToObject(o, "paired");
    }
    cJSON_AddStringToObject(o, "cpu_model", f->cpu_model);
    cJSON_AddStringToObject(o, "openblas_corename", blas_core_name());
    /* realpos sets OMP_WAIT_POLICY=PASSIVE unless it or GOMP_SPINCOUNT is given (main.c) */
    add_string_or_null(o, "omp_wait_policy", getenv("OMP_WAIT_POLICY"));
    add_string_or_null(o, "openblas_coretype_env", f->coretype);
    char *text = cJSON_Print(o);
    size_t len = strlen(text);
    text = realloc(text, len + 2);
    RP_CHECK(text, "out of memory");
    memcpy(text + len, "\n", 2);
    write_file(path, text, len + 1); /* temp + fsync + rename */
    free(text);
    cJSON_Delete(o);
}

int cmd_bench(int argc, char **argv) {
    BenchArgs a;
    parse_args(&a, argc, argv);
    Dist dist;
    dist_init(&dist, NULL, NULL);
    BenchRun r;
    open_sides(&r, &a, &dist);
    run_steps(&r, &a);
    BenchFigures f;
    work_out_figures(&f, &r, &a);
    print_report(&f, &r, &a);
    if (a.json_path)
        write_json(a.json_path, &f, &r, &a);
    free(r.probes), free(r.bf16_probes), free(f.ratios);
    if (a.against_path)
        bench_side_free(&r.other);
    bench_side_free(&r.side);
    dist_finalize(&dist);
    return 0;
}
