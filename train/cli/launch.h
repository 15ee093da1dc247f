/* What `realpos pretrain` and `finetune` print when they start: a short summary of the run (model,
 * positions, residual attention, data, steps, batch, schedule, where its files are); the whole
 * configuration and the parameter table only with --verbose (both are in the run directory:
 * config.ini, parameters.txt). */
#pragma once
#include <stdio.h>

#include "train/config/config.h"

typedef struct {
    const char *data;       /* "data/shards/default (max_seq_len 128)", "train.tsv -> 67349 sequences" */
    long steps;             /* optimizer steps of the run */
    int warmup;             /* warm-up steps */
    int batch_size;         /* sequences per micro-batch */
    float lr;               /* peak learning rate */
    const char *schedule;   /* "linear", "cosine", "constant" */
    const char *parameters; /* "37 loaded, 0 grown, 4 initialised, 5 dropped from CKPT", or NULL */
} LaunchFacts;

/* The summary lines (rank 0 calls it), then with verbose the configuration text. */
void launch_report(FILE *out, const Config *cfg, const char *job, const LaunchFacts *facts, const char *config_ini,
                   int verbose);
/* RUN_DIR/parameters.txt: the table of what happened to each parameter at the start of a fresh run
 * (written whole or not at all); with verbose also printed to `out`. */
void launch_write_parameters(FILE *out, const char *run_dir, const char *table, int verbose);
