#include "train/loop/metrics.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

static const char *CSV_HEADER = "kind,step,loss,accuracy,lr,grad_norm,tokens_per_s,mfu,elapsed_s,eta_s,"
                                "eval_loss,eval_accuracy,eval_perplexity\n";

void metrics_open(MetricsLog *log, const char *run_dir, int append) {
    char path[4096];
    memset(log, 0, sizeof *log);
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    log->jsonl = fopen(path, append ? "a" : "w");
    RP_CHECK(log->jsonl, "%s: cannot open for writing", path);
    snprintf(path, sizeof path, "%s/metrics.csv", run_dir);
    FILE *existing = append ? fopen(path, "r") : NULL;
    int has_header = existing && fgetc(existing) != EOF;
    if (existing)
        fclose(existing);
    log->csv = fopen(path, append ? "a" : "w");
    RP_CHECK(log->csv, "%s: cannot open for writing", path);
    if (!has_header)
        fputs(CSV_HEADER, log->csv);
    log->tty = isatty(fileno(stderr));
}

static void format_hms(char *buf, size_t size, double seconds) {
    long s = seconds > 0 && isfinite(seconds) ? (long)(seconds + 0.5) : 0;
    snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

static void end_progress_line(MetricsLog *log) {
    if (log->line_pending) {
        fputc('\n', stderr);
        log->line_pending = 0;
    }
}

void metrics_write(MetricsLog *log, const MetricsRecord *r) {
    int eval = !strcmp(r->kind, "eval");
    if (eval) {
        fprintf(log->jsonl, "{\"kind\":\"eval\",\"step\":%ld,\"eval_loss\":%.6f,\"eval_accuracy\":%.6f,"
                            "\"eval_perplexity\":%.4f}\n",
                r->step, r->eval_loss, r->eval_accuracy, r->eval_perplexity);
        fprintf(log->csv, "eval,%ld,,,,,,,,,%.6f,%.6f,%.4f\n", r->step, r->eval_loss, r->eval_accuracy,
                r->eval_perplexity);
    } else {
        fprintf(log->jsonl,
                "{\"kind\":\"train\",\"step\":%ld,\"loss\":%.6f,\"accuracy\":%.6f,\"lr\":%.6e,\"grad_norm\":%.6f,"
                "\"tokens_per_s\":%.1f,\"mfu\":%.4f,\"elapsed_s\":%.2f,\"eta_s\":%.2f}\n",
                r->step, r->loss, r->accuracy, r->lr, r->grad_norm, r->tokens_per_s, r->mfu, r->elapsed_s, r->eta_s);
        fprintf(log->csv, "train,%ld,%.6f,%.6f,%.6e,%.6f,%.1f,%.4f,%.2f,%.2f,,,\n", r->step, r->loss, r->accuracy,
                r->lr, r->grad_norm, r->tokens_per_s, r->mfu, r->elapsed_s, r->eta_s);
    }
    fflush(log->jsonl);
    fflush(log->csv);

    char elapsed[32], eta[32];
    format_hms(elapsed, sizeof elapsed, r->elapsed_s);
    format_hms(eta, sizeof eta, r->eta_s);
    end_progress_line(log);
    if (eval)
        fprintf(stderr, "eval  step %6ld | mlm loss %.4f | accuracy %.4f | perplexity %.2f\n", r->step, r->eval_loss,
                r->eval_accuracy, r->eval_perplexity);
    else
        fprintf(stderr,
                "step %6ld/%ld | loss %.4f | acc %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | MFU %.1f%% | "
                "%s elapsed | ETA %s\n",
                r->step, r->total_steps, r->loss, r->accuracy, r->lr, r->grad_norm, r->tokens_per_s, 100 * r->mfu,
                elapsed, eta);
}

void metrics_progress(MetricsLog *log, const MetricsRecord *r) {
    if (!log->tty)
        return;
    const int width = 24;
    int filled = r->total_steps ? (int)(width * r->step / r->total_steps) : 0;
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    char eta[32];
    format_hms(eta, sizeof eta, r->eta_s);
    fprintf(stderr, "\r[%s] %ld/%ld loss %.4f | %.0f tok/s | ETA %s  ", bar, r->step, r->total_steps, r->loss,
            r->tokens_per_s, eta);
    fflush(stderr);
    log->line_pending = 1;
}

void metrics_close(MetricsLog *log) {
    end_progress_line(log);
    if (log->jsonl)
        fclose(log->jsonl);
    if (log->csv)
        fclose(log->csv);
    memset(log, 0, sizeof *log);
}
