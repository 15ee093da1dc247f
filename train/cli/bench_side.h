/* One configuration `realpos bench` times (cmd_bench.c): its config, batch source, training step
 * and the timings of its steps, and what the report says of it. */
#pragma once

#include "core/config/cli.h"
#include "train/cli/bench_sources.h"
#include "train/config/config.h"
#include "train/loop/step.h"

/* What both sides of a run share: the batch source's options and the step counts. */
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

/* The side of config_path with the command's --set overrides (args) and options; its step made and
 * begun (the peak probed at start-up: train_step_begin). */
void bench_side_create(BenchSide *b, const char *config_path, CliArgs args, const BenchOptions *o, Dist *dist);
/* Step s of the run, timed from s = warmup on (the counts reset at s = warmup). */
void bench_side_step(BenchSide *b, int s, int warmup);
void bench_side_free(BenchSide *b);
/* The side's precision and its timed products per step, e.g. "fp32 (OpenBLAS)" or "bf16 (oneDNN
 * brg:avx512_core_bf16: 60 products per step, ...)". */
void bench_side_describe_precision(const BenchSide *b, int steps, char *out, size_t size);
/* Per step pair k: ratios [k] = (seconds per real token of a) / (those of b); their median, min, max. */
void bench_pair_ratios(const BenchSide *a, const BenchSide *b, int steps, double *ratios, double *median, double *lo,
                       double *hi);
