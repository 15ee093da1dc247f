#include "train/loop/metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"

static const char *CSV_HEADER = "kind,step,loss,accuracy,lr,grad_norm,tokens_per_s,mfu,elapsed_s,eta_s,"
                                "eval_loss,eval_accuracy,eval_perplexity\n";

/* The step of a metrics line: JSON's "step" member or the CSV's second column; -1 for a line
 * without one (the CSV header), -2 for a line that is not a record (cut short by a kill). */
static long line_step(const char *line, int csv) {
    if (csv) {
        const char *comma = strchr(line, ',');
        char *end;
        long step = comma ? strtol(comma + 1, &end, 10) : -1;
        return !comma || !strncmp(line, "kind,", 5) ? -1 : end > comma + 1 && *end == ',' ? step : -2;
    }
    cJSON *rec = cJSON_Parse(line);
    const cJSON *step = rec ? cJSON_GetObjectItemCaseSensitive(rec, "step") : NULL;
    long value = !rec ? -2 : cJSON_IsNumber(step) ? (long)step->valuedouble : -1;
    cJSON_Delete(rec);
    return value;
}

/* Keep the lines of path up to step `last` (see metrics_open); returns the number dropped. */
static int drop_records_after(const char *path, int csv, long last) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0; /* none yet, or not a file to rewrite (appending to it fails or succeeds as before) */
    size_t len;
    char *text = read_file(path, &len, csv ? "metrics (CSV)" : "metrics (JSON Lines)");
    char *kept = xmalloc(len + 1);
    size_t used = 0;
    int dropped = 0;
    for (char *line = text, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        int whole = *next == '\n';
        if (whole)
            *next++ = '\0';
        long step = whole ? line_step(line, csv) : -2;
        if (step == -2 || step > last) {
            dropped += line[0] != '\0';
            continue;
        }
        size_t n = strlen(line);
        memcpy(kept + used, line, n);
        used += n;
        kept[used++] = '\n';
    }
    if (dropped)
        write_file(path, kept, used); /* whole or not at all */
    free(kept);
    free(text);
    return dropped;
}

void metrics_open(MetricsLog *log, const char *run_dir, int append, long resumed_step) {
    memset(log, 0, sizeof *log);
    snprintf(log->jsonl_path, sizeof log->jsonl_path, "%s/metrics.jsonl", run_dir);
    snprintf(log->csv_path, sizeof log->csv_path, "%s/metrics.csv", run_dir);
    if (append) {
        int jsonl = drop_records_after(log->jsonl_path, 0, resumed_step);
        int csv = drop_records_after(log->csv_path, 1, resumed_step);
        if (jsonl || csv)
            rp_log("%s, %s: dropped %d and %d records after step %ld (written after the checkpoint this run "
                   "resumes from; they are written again)", log->jsonl_path, log->csv_path, jsonl, csv, resumed_step);
    }
    log->jsonl = fopen(log->jsonl_path, append ? "a" : "w");
    RP_CHECK(log->jsonl, "%s: cannot open for writing: %s", log->jsonl_path, strerror(errno));
    const char *path = log->csv_path;
    struct stat st; /* stat, not a read: a FIFO (a reader streaming the metrics) must not block here */
    int has_header = append && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    log->csv = fopen(path, append ? "a" : "w");
    RP_CHECK(log->csv, "%s: cannot open for writing: %s", path, strerror(errno));
    if (!has_header)
        fputs(CSV_HEADER, log->csv);
    metrics_flush(log);
    log->tty = isatty(fileno(stderr));
}

void metrics_flush(MetricsLog *log) {
    RP_CHECK(fflush(log->jsonl) == 0 && !ferror(log->jsonl), "%s: cannot write metrics: %s", log->jsonl_path,
             strerror(errno));
    RP_CHECK(fflush(log->csv) == 0 && !ferror(log->csv), "%s: cannot write metrics: %s", log->csv_path,
             strerror(errno));
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
    /* Full precision: cJSON prints the shortest text that reads back as the same double; the CSV
     * uses %.17g for the same reason. */
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", r->kind);
    cJSON_AddNumberToObject(rec, "step", (double)r->step);
    const char *names[] = {"loss", "accuracy", "lr", "grad_norm", "tokens_per_s", "mfu", "elapsed_s", "eta_s",
                           "eval_loss", "eval_accuracy", "eval_perplexity"};
    const double values[] = {r->loss, r->accuracy, r->lr, r->grad_norm, r->tokens_per_s, r->mfu, r->elapsed_s,
                             r->eta_s, r->eval_loss, r->eval_accuracy, r->eval_perplexity};
    fprintf(log->csv, "%s,%ld", r->kind, r->step);
    for (int i = 0; i < 11; i++) {
        int applies = eval ? i >= 8 : i < 8;
        if (applies)
            cJSON_AddNumberToObject(rec, names[i], values[i]); /* a non-finite value prints null */
        if (applies)
            fprintf(log->csv, ",%.17g", values[i]);
        else
            fputc(',', log->csv);
    }
    fputc('\n', log->csv);
    if (eval) /* the baseline a model must beat (jsonl only: the CSV's columns are fixed) */
        cJSON_AddNumberToObject(rec, "unigram_accuracy", r->eval_unigram_accuracy);
    if (!eval) { /* MFU's terms, so that a figure can be checked (jsonl only: the CSV's columns are fixed) */
        cJSON_AddNumberToObject(rec, "gflops", r->gflops);
        cJSON_AddNumberToObject(rec, "peak_gflops", r->peak_gflops);
        cJSON_AddStringToObject(rec, "peak_source", r->peak_source ? r->peak_source : "none");
        cJSON_AddStringToObject(rec, "peak_precision", r->peak_precision ? r->peak_precision : "none");
    }
    char *text = cJSON_PrintUnformatted(rec);
    RP_CHECK(text, "out of memory formatting a metrics record");
    fprintf(log->jsonl, "%s\n", text);
    cJSON_free(text);
    cJSON_Delete(rec);
    metrics_flush(log);

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
    RP_CHECK(!log->jsonl || fclose(log->jsonl) == 0, "%s: cannot write metrics: %s", log->jsonl_path,
             strerror(errno));
    RP_CHECK(!log->csv || fclose(log->csv) == 0, "%s: cannot write metrics: %s", log->csv_path, strerror(errno));
    memset(log, 0, sizeof *log);
}
