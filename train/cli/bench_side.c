/* The sides of `realpos bench` (train/cli/bench_side.h). */
#include "train/cli/bench_side.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "train/loop/finetune.h"
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

void bench_side_create(BenchSide *b, const char *config_path, CliArgs args, const BenchOptions *o, Dist *dist) {
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
void bench_side_step(BenchSide *b, int s, int warmup) {
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

void bench_side_free(BenchSide *b) {
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
void bench_side_describe_precision(const BenchSide *b, int steps, char *out, size_t size) {
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
void bench_pair_ratios(const BenchSide *a, const BenchSide *b, int steps, double *ratios, double *median, double *lo,
                       double *hi) {
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

