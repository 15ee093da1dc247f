/* Prediction with the task's metrics, shared by finetune and predict (task_runner.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "train/tasks/task_runner.h"
#include "train/tasks/squad_eval.h"
#include "train/tasks/task_metrics.h"

/* Sequence indices by length, longest first (ties: lower index first, so the order is a pure
 * function of the data). A batch of similar lengths pads little; each sequence's logits do not
 * depend on its batch (padding is masked), so the order changes the time only. */
int *rows_by_length(const TaskFeatures *f) {
    int count = f->count, longest = 0;
    for (int i = 0; i < count; i++)
        longest = f->lengths[i] > longest ? f->lengths[i] : longest;
    int *starts = xcalloc((size_t)longest + 2, sizeof(int)), *rows = xmalloc(sizeof(int) * (size_t)count + 1);
    for (int i = 0; i < count; i++) /* counting sort on longest - length */
        starts[longest - f->lengths[i] + 1]++;
    for (int n = 1; n <= longest + 1; n++)
        starts[n] += starts[n - 1];
    for (int i = 0; i < count; i++)
        rows[starts[longest - f->lengths[i]]++] = i;
    free(starts);
    return rows;
}

/* Forward every sequence of f in batches of B (the last padded with padding rows), longest
 * first; out: [count, C] logits or [count, L] start and end logits (-inf past each batch's
 * length, as on its padding). */
static int predict_all(TaskRunner *r, const TaskFeatures *f, float *out, float *out_end) {
    int B = r->B, L = r->L, C = r->heads.C, *order = rows_by_length(f);
    for (int first = 0; first < f->count; first += B) {
        if (r->should_stop && r->should_stop()) {
            free(order);
            return 0; /* a stop signal: the caller saves and exits, promptly */
        }
        for (int b = 0; b < B; b++)
            r->rows[b] = first + b < f->count ? order[first + b] : -1;
        task_fill_batch(r, f, r->rows);
        const float *hidden = model_encode(&r->model, &r->acts, &r->batch, FORWARD_EVAL, 0);
        head_forward(&r->model, &r->heads, hidden, &r->batch, 0, 0);
        int n = f->count - first < B ? f->count - first : B, batch_L = r->batch.L;
        for (int b = 0; b < n; b++) {
            size_t i = (size_t)r->rows[b];
            if (r->heads.span) {
                float *s = out + i * L, *e = out_end + i * L;
                memcpy(s, r->heads.start + (size_t)b * batch_L, sizeof(float) * (size_t)batch_L);
                memcpy(e, r->heads.end + (size_t)b * batch_L, sizeof(float) * (size_t)batch_L);
                for (int l = batch_L; l < L; l++)
                    s[l] = e[l] = -INFINITY;
            } else {
                memcpy(out + i * C, r->heads.logits + (size_t)b * C, sizeof(float) * (size_t)C);
            }
        }
    }
    free(order);
    return 1;
}

/* {"kind":"task_eval" (or r->record_kind), "step":N when the evaluation belongs to a training step, "data":PATH, ...} */
static cJSON *task_record(const char *kind, const char *data_path, long step) {
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", kind ? kind : "task_eval");
    if (step >= 0)
        cJSON_AddNumberToObject(rec, "step", (double)step);
    cJSON_AddStringToObject(rec, "data", data_path);
    return rec;
}

/* One line of metrics.jsonl at full double precision (cJSON prints the shortest text that reads
 * back as the same double); takes rec. */
static void write_record(FILE *results, cJSON *rec) {
    if (results) {
        char *text = cJSON_PrintUnformatted(rec);
        RP_CHECK(text, "out of memory formatting a metrics record");
        fprintf(results, "%s\n", text);
        cJSON_free(text);
    }
    cJSON_Delete(rec);
}

/* Where the metrics line goes: standard output, or the log for an evaluation during training. */
static FILE *score_out(const TaskRunner *r, long step) {
    if (!r->interim_eval)
        return stdout;
    fprintf(stderr, "dev at step %ld: ", step);
    return stderr;
}

static TaskScore predict_squad(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step) {
    TaskScore score = {NULL, NAN, NAN};
    TaskFeatures *f = &d->features;
    float *start = xalloc_floats((size_t)f->count * r->L), *end = xalloc_floats((size_t)f->count * r->L);
    if (!predict_all(r, f, start, end)) {
        free(start);
        free(end);
        return score;
    }
    SquadNbest *nbest = out_path ? xcalloc((size_t)d->squad.num_questions, sizeof *nbest) : NULL;
    char **answers = squad_best_answers(&d->squad, &r->cfg.task, r->tok, f, &d->windows, start, end, nbest);
    if (out_path) {
        char nbest_path[4096];
        squad_nbest_path(nbest_path, sizeof nbest_path, out_path);
        squad_write_predictions(out_path, &d->squad, answers);
        squad_write_nbest(nbest_path, &d->squad, nbest);
        squad_nbest_free(nbest, d->squad.num_questions);
        rp_log("the %d best answers of each question, with their logits and probabilities, written to %s",
               r->cfg.task.n_best_size, nbest_path);
    }
    SquadScores s = squad_evaluate(&d->squad, answers);
    if (s.scored) {
        FILE *out = score_out(r, step);
        fprintf(out, "%s: exact match %.2f, F1 %.2f over %d questions (%d windows, max_seq_len %d", d->path, s.exact_match,
               s.f1, s.scored + s.unscored, f->count, r->L);
        if (d->squad.num_unlocated)
            fprintf(out, "; %d whose answer_start misses the text, scored by the text", d->squad.num_unlocated);
        if (s.unscored)
            fprintf(out, "; %d malformed, scored 0", s.unscored);
        fprintf(out, ")\n");
        score = (TaskScore){"f1", s.f1, NAN};
        cJSON *rec = task_record(r->record_kind, d->path, step);
        cJSON_AddNumberToObject(rec, "questions", s.scored + s.unscored);
        cJSON_AddNumberToObject(rec, "unscored_questions", s.unscored);
        cJSON_AddNumberToObject(rec, "answer_start_mismatches", d->squad.num_unlocated);
        cJSON_AddNumberToObject(rec, "exact_match", s.exact_match);
        cJSON_AddNumberToObject(rec, "f1", s.f1);
        write_record(results, rec);
    }
    for (int q = 0; q < d->squad.num_questions; q++)
        free(answers[q]);
    free(answers);
    free(start);
    free(end);
    return score;
}

/* The task's primary metric: Matthews for CoLA, F1 for MRPC, Pearson for regression, else accuracy. */
static TaskScore glue_metrics(const TaskRunner *r, const TaskData *d, const int *pred, const float *pred_values,
                              FILE *results, long step) {
    cJSON *rec = task_record(r->record_kind, d->path, step);
    const TaskFeatures *f = &d->features;
    int n = f->count;
    if (r->layout.type == TASK_REGRESSION) {
        double *x = xmalloc(sizeof(double) * (size_t)n), *y = xmalloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) {
            x[i] = pred_values[i];
            y[i] = f->values[i];
        }
        double pearson = metric_pearson(x, y, n), spearman = metric_spearman(x, y, n);
        fprintf(score_out(r, step), "%s: Pearson %.4f, Spearman %.4f over %d examples\n", d->path, pearson, spearman, n);
        cJSON_AddNumberToObject(rec, "examples", n);
        cJSON_AddNumberToObject(rec, "pearson", pearson);
        cJSON_AddNumberToObject(rec, "spearman", spearman);
        write_record(results, rec);
        free(x);
        free(y);
        return (TaskScore){"pearson", pearson, NAN};
    }
    int C = r->layout.num_labels, *gold = f->labels;
    int *counts = xcalloc((size_t)C, sizeof(int)), majority = 0;
    for (int i = 0; i < n; i++)
        counts[gold[i]]++;
    for (int c = 1; c < C; c++)
        majority = counts[c] > counts[majority] ? c : majority;
    double acc = metric_accuracy(pred, gold, n), f1 = metric_f1(pred, gold, n, 1);
    double mcc = metric_matthews(pred, gold, n, C), baseline = (double)counts[majority] / n;
    fprintf(score_out(r, step), "%s: accuracy %.4f (majority class '%s': %.4f), F1 of '%s' %.4f, Matthews %.4f over %d examples\n",
           d->path, acc, r->layout.label_names[majority], baseline, r->layout.label_names[1], f1, mcc, n);
    cJSON_AddNumberToObject(rec, "examples", n);
    cJSON_AddNumberToObject(rec, "accuracy", acc);
    cJSON_AddNumberToObject(rec, "majority_baseline", baseline);
    cJSON_AddNumberToObject(rec, "f1", f1);
    cJSON_AddNumberToObject(rec, "matthews", mcc);
    write_record(results, rec);
    free(counts);
    GlueTask task = r->cfg.task.glue_task;
    return task == GLUE_COLA ? (TaskScore){"matthews", mcc, NAN}
           : task == GLUE_MRPC ? (TaskScore){"f1", f1, NAN}
                               : (TaskScore){"accuracy", acc, NAN};
}

TaskScore task_predict(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step) {
    double t0 = now_seconds();
    TaskScore score = {NULL, NAN, NAN};
    if (r->cfg.task.type == TASK_TAGGING) {
        return tagging_predict(r, d, out_path, results, step);
    } else if (r->cfg.task.type == TASK_SQUAD) {
        score = predict_squad(r, d, out_path, results, step);
    } else {
        TaskFeatures *f = &d->features;
        int C = r->heads.C;
        float *logits = xalloc_floats((size_t)f->count * C), *values = xalloc_floats((size_t)f->count);
        int *pred = xcalloc((size_t)f->count, sizeof(int)), labelled = predict_all(r, f, logits, NULL);
        if (!labelled)
            out_path = NULL; /* interrupted: no predictions, no metrics */
        for (int i = 0; i < f->count; i++) {
            const float *z = logits + (size_t)i * C;
            for (int c = 1; c < C; c++)
                pred[i] = z[c] > z[pred[i]] ? c : pred[i];
            values[i] = z[0];
            labelled &= f->labels[i] >= 0 || !isnan(f->values[i]);
        }
        if (out_path)
            glue_write_predictions(out_path, &r->layout, f, logits, pred, values);
        if (labelled)
            score = glue_metrics(r, d, pred, values, results, step);
        free(logits);
        free(values);
        free(pred);
    }
    if (results)
        fflush(results);
    if (out_path)
        rp_log("predictions for %s written to %s (%.1f s)", d->path, out_path, now_seconds() - t0);
    return score;
}
