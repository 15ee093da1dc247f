/* Prediction with the task's metrics, shared by finetune and predict (task_runner.h). */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "train/tasks/task_runner.h"
#include "train/tasks/squad_eval.h"
#include "train/tasks/task_metrics.h"

/* Forward every sequence of f in batches of B (the last padded); out: [count, C] logits or
 * [count, L] start and end logits. */
static void predict_all(TaskRunner *r, const TaskFeatures *f, float *out, float *out_end) {
    int B = r->B, L = r->L, C = r->heads.C;
    for (int first = 0; first < f->count; first += B) {
        for (int b = 0; b < B; b++)
            r->rows[b] = first + b < f->count ? first + b : -1;
        task_fill_batch(r, f, r->rows);
        Batch batch = {B, L, r->input_ids, r->token_type_ids, r->attention_mask, NULL};
        const float *hidden = model_encode(&r->model, &r->acts, &batch, 0, 0);
        head_forward(&r->model, &r->heads, hidden, 0, 0);
        int n = f->count - first < B ? f->count - first : B;
        if (r->heads.span) {
            memcpy(out + (size_t)first * L, r->heads.start, sizeof(float) * (size_t)n * L);
            memcpy(out_end + (size_t)first * L, r->heads.end, sizeof(float) * (size_t)n * L);
        } else {
            memcpy(out + (size_t)first * C, r->heads.logits, sizeof(float) * (size_t)n * C);
        }
    }
}

/* {"kind":"task_eval", and "step":N, when the evaluation belongs to a training step */
static void begin_record(FILE *results, long step) {
    fputs("{\"kind\":\"task_eval\",", results);
    if (step >= 0)
        fprintf(results, "\"step\":%ld,", step);
}

static TaskScore predict_squad(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step) {
    TaskScore score = {NULL, NAN};
    TaskFeatures *f = &d->features;
    float *start = xalloc_floats((size_t)f->count * r->L), *end = xalloc_floats((size_t)f->count * r->L);
    predict_all(r, f, start, end);
    char **answers = squad_best_answers(&d->squad, &r->cfg.task, r->tok, f, &d->windows, start, end);
    if (out_path)
        squad_write_predictions(out_path, &d->squad, answers);
    SquadScores s = squad_evaluate(&d->squad, answers);
    if (s.scored) {
        printf("%s: exact match %.2f, F1 %.2f over %d questions (%d windows, max_seq_len %d)\n", d->path,
               s.exact_match, s.f1, s.scored, f->count, r->L);
        score = (TaskScore){"f1", s.f1};
        if (results)
            begin_record(results, step);
        if (results)
            fprintf(results, "\"data\":\"%s\",\"questions\":%d,\"exact_match\":%.4f,\"f1\":%.4f}\n",
                    d->path, s.scored, s.exact_match, s.f1);
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
    if (results)
        begin_record(results, step);
    const TaskFeatures *f = &d->features;
    int n = f->count;
    if (r->layout.type == TASK_REGRESSION) {
        double *x = xmalloc(sizeof(double) * (size_t)n), *y = xmalloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) {
            x[i] = pred_values[i];
            y[i] = f->values[i];
        }
        double pearson = metric_pearson(x, y, n), spearman = metric_spearman(x, y, n);
        printf("%s: Pearson %.4f, Spearman %.4f over %d examples\n", d->path, pearson, spearman, n);
        if (results)
            fprintf(results, "\"data\":\"%s\",\"examples\":%d,\"pearson\":%.6f,"
                    "\"spearman\":%.6f}\n", d->path, n, pearson, spearman);
        free(x);
        free(y);
        return (TaskScore){"pearson", pearson};
    }
    int C = r->layout.num_labels, *gold = f->labels;
    int *counts = xcalloc((size_t)C, sizeof(int)), majority = 0;
    for (int i = 0; i < n; i++)
        counts[gold[i]]++;
    for (int c = 1; c < C; c++)
        majority = counts[c] > counts[majority] ? c : majority;
    double acc = metric_accuracy(pred, gold, n), f1 = metric_f1(pred, gold, n, 1);
    double mcc = metric_matthews(pred, gold, n, C), baseline = (double)counts[majority] / n;
    printf("%s: accuracy %.4f (majority class '%s': %.4f), F1 of '%s' %.4f, Matthews %.4f over %d examples\n",
           d->path, acc, r->layout.label_names[majority], baseline, r->layout.label_names[1], f1, mcc, n);
    if (results)
        fprintf(results, "\"data\":\"%s\",\"examples\":%d,\"accuracy\":%.6f,"
                "\"majority_baseline\":%.6f,\"f1\":%.6f,\"matthews\":%.6f}\n", d->path, n, acc, baseline, f1, mcc);
    free(counts);
    GlueTask task = r->cfg.task.glue_task;
    return task == GLUE_COLA ? (TaskScore){"matthews", mcc}
           : task == GLUE_MRPC ? (TaskScore){"f1", f1}
                               : (TaskScore){"accuracy", acc};
}

TaskScore task_predict(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step) {
    double t0 = now_seconds();
    TaskScore score = {NULL, NAN};
    if (r->cfg.task.type == TASK_SQUAD) {
        score = predict_squad(r, d, out_path, results, step);
    } else {
        TaskFeatures *f = &d->features;
        int C = r->heads.C;
        float *logits = xalloc_floats((size_t)f->count * C), *values = xalloc_floats((size_t)f->count);
        int *pred = xcalloc((size_t)f->count, sizeof(int)), labelled = 1;
        predict_all(r, f, logits, NULL);
        for (int i = 0; i < f->count; i++) {
            const float *z = logits + (size_t)i * C;
            for (int c = 1; c < C; c++)
                pred[i] = z[c] > z[pred[i]] ? c : pred[i];
            values[i] = z[0];
            labelled &= f->labels[i] >= 0 || !isnan(f->values[i]);
        }
        if (out_path)
            glue_write_predictions(out_path, &r->layout, f, pred, values);
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
