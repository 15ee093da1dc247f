/* Training metrics: one record per log/eval event, written to RUN_DIR/metrics.jsonl and
 * RUN_DIR/metrics.csv (fixed columns, empty where a value does not apply), and shown on stderr
 * as a single-line progress bar on a terminal or as plain lines otherwise. */
#pragma once
#include <stdio.h>

typedef struct {
    const char *kind; /* "train" or "eval" */
    long step, total_steps;
    double loss, accuracy, lr, grad_norm;        /* train */
    double tokens_per_s, mfu, elapsed_s, eta_s;  /* train */
    double gflops, peak_gflops; /* train: model GFLOP/s of the window; mfu = gflops / peak_gflops */
    const char *peak_source;    /* train: how the peak was obtained (train/loop/peak.h) */
    const char *peak_precision; /* train: whose peak: "fp32" (sgemm) or "bf16" (bf16 products) */
    double eval_loss, eval_accuracy, eval_perplexity; /* eval */
    double eval_unigram_accuracy; /* eval (jsonl only): always predicting the most frequent token */
} MetricsRecord;

typedef struct {
    FILE *jsonl, *csv;
    char jsonl_path[4096], csv_path[4096]; /* for messages: a failed write is an error */
    int tty;          /* stderr is a terminal: redraw a progress line */
    int line_pending; /* a progress line without newline is on screen */
} MetricsLog;

/* Open (append when resuming, so a resumed run continues the same files). A resume from step
 * `resumed_step` (append) first drops the records of later steps (written after the checkpoint, by
 * the run that was killed; the resumed run writes them again) and a last line cut short by the
 * kill, rewriting each file whole (temp + rename) and logging how many it dropped. */
void metrics_open(MetricsLog *log, const char *run_dir, int append, long resumed_step);
void metrics_write(MetricsLog *log, const MetricsRecord *r);
/* Flush both files; fatal (naming the file and the reason, e.g. disk full) if a write failed. */
void metrics_flush(MetricsLog *log);
/* Progress bar on a terminal (no-op otherwise). */
void metrics_progress(MetricsLog *log, const MetricsRecord *r);
void metrics_close(MetricsLog *log);
