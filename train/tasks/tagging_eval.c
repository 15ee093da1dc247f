/* Tagging prediction and metrics (task_runner.h: tagging_predict; the metrics tag_metrics.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "core/io/atomic_file.h"
#include "core/common.h"
#include "train/tasks/tag_metrics.h"
#include "train/tasks/task_runner.h"

/* Every word's predicted label and its probability (softmax of its first piece's logits); -1 and 0
 * for a truncated word. Returns 0 when a stop signal interrupted it. */
static int predict_words(TaskRunner *r, const TaskData *d, int *pred, float *prob) {
    const TaskFeatures *f = &d->features;
    const TagSet *set = &d->tags;
    int B = r->B, C = r->heads.C, *order = rows_by_length(f);
    for (int w = 0; w < set->num_words; w++) {
        pred[w] = -1;
        prob[w] = 0;
    }
    for (int first = 0; first < f->count; first += B) {
        if (r->should_stop && r->should_stop()) {
            free(order);
            return 0;
        }
        for (int b = 0; b < B; b++)
            r->rows[b] = first + b < f->count ? order[first + b] : -1;
        task_fill_batch(r, f, r->rows);
        const float *hidden = model_encode(&r->model, &r->acts, &r->batch, FORWARD_EVAL, 0);
        head_forward(&r->model, &r->heads, hidden, &r->batch, 0, 0);
        for (int b = 0; b < B && first + b < f->count; b++) {
            int e = f->example[r->rows[b]];
            for (int w = set->first_word[e]; w < set->first_word[e + 1]; w++) {
                if (set->position[w] < 0)
                    continue;
                const float *z = r->heads.logits + ((size_t)b * r->batch.L + (size_t)set->position[w]) * C;
                int best = 0;
                for (int c = 1; c < C; c++)
                    best = z[c] > z[best] ? c : best;
                double sum = 0;
                for (int c = 0; c < C; c++)
                    sum += exp((double)z[c] - z[best]);
                pred[w] = best;
                prob[w] = (float)(1.0 / sum);
            }
        }
    }
    free(order);
    return 1;
}

static void write_predictions(const char *path, const TagLabels *ls, const TagSet *set, const int *pred,
                              const float *prob) {
    AtomicFile file;
    FILE *out = atomic_file_open_or_die(&file, path);
    for (int e = 0; e < set->num_examples; e++) {
        for (int w = set->first_word[e]; w < set->first_word[e + 1]; w++)
            fprintf(out, "%s\t%s\t%.6f\n", set->words[w], pred[w] >= 0 ? ls->names[pred[w]] : "[TRUNCATED]",
                    (double)prob[w]);
        fputc('\n', out);
    }
    atomic_file_commit_or_die(&file);
}

static cJSON *accuracy_json(const TagAccuracy *a) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "sequences", (double)a->sequences);
    cJSON_AddNumberToObject(o, "words", (double)a->words);
    cJSON_AddNumberToObject(o, "token_accuracy", tag_ratio(a->words_right, a->words));
    cJSON_AddNumberToObject(o, "sequence_accuracy", tag_ratio(a->sequences_right, a->sequences));
    return o;
}

static TaskScore report(const TaskRunner *r, const TaskData *d, const TagScores *s, FILE *results, long step) {
    const TagLabels *ls = &r->tags;
    int edge = r->cfg.task.train_max_length;
    FILE *out = stdout;
    if (r->interim_eval) {
        out = stderr;
        fprintf(stderr, "dev at step %ld: ", step);
    }
    fprintf(out, "%s: token accuracy %.4f, sequence accuracy %.4f over %ld sequences", d->path,
            tag_ratio(s->all.words_right, s->all.words), tag_ratio(s->all.sequences_right, s->all.sequences),
            s->all.sequences);
    if (ls->bio)
        fprintf(out, ", entity precision %.4f, recall %.4f, F1 %.4f",
                tag_ratio(s->entities_right, s->entities_predicted), tag_ratio(s->entities_right, s->entities_gold),
                tag_f1(s));
    if (edge > 0)
        fprintf(out, "; within the training lengths (<= %d words): token %.4f, sequence %.4f over %ld; beyond: token "
                "%.4f, sequence %.4f over %ld\n", edge, tag_ratio(s->in_range.words_right, s->in_range.words),
                tag_ratio(s->in_range.sequences_right, s->in_range.sequences), s->in_range.sequences,
                tag_ratio(s->beyond.words_right, s->beyond.words),
                tag_ratio(s->beyond.sequences_right, s->beyond.sequences), s->beyond.sequences);
    else /* a checkpoint that never measured its training data (imported from HuggingFace) */
        fprintf(out, "; the training lengths are unknown (task.train_max_length = 0: not measured for this "
                "checkpoint), so no split within / beyond them (give one with --set task.train_max_length=N)\n");
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "kind", r->record_kind ? r->record_kind : "task_eval");
    if (step >= 0)
        cJSON_AddNumberToObject(rec, "step", (double)step);
    cJSON_AddStringToObject(rec, "data", d->path);
    cJSON_AddNumberToObject(rec, "examples", (double)s->all.sequences);
    cJSON_AddNumberToObject(rec, "accuracy", tag_ratio(s->all.words_right, s->all.words));
    cJSON_AddNumberToObject(rec, "sequence_accuracy", tag_ratio(s->all.sequences_right, s->all.sequences));
    if (ls->bio) {
        cJSON_AddNumberToObject(rec, "entity_precision", tag_ratio(s->entities_right, s->entities_predicted));
        cJSON_AddNumberToObject(rec, "entity_recall", tag_ratio(s->entities_right, s->entities_gold));
        cJSON_AddNumberToObject(rec, "f1", tag_f1(s));
    }
    if (edge > 0) {
        cJSON_AddNumberToObject(rec, "train_max_length", edge);
        cJSON_AddItemToObject(rec, "in_range", accuracy_json(&s->in_range));
        cJSON_AddItemToObject(rec, "beyond", accuracy_json(&s->beyond));
    } else {
        cJSON_AddNullToObject(rec, "train_max_length"); /* unknown: no in_range / beyond */
    }
    cJSON *by = cJSON_AddObjectToObject(rec, "by_length"); /* words -> accuracies */
    for (int n = 0; n <= s->max_length; n++)
        if (s->by_length[n].sequences) {
            char key[16];
            snprintf(key, sizeof key, "%d", n);
            cJSON_AddItemToObject(by, key, accuracy_json(&s->by_length[n]));
        }
    if (results) {
        char *text = cJSON_PrintUnformatted(rec);
        fprintf(results, "%s\n", text);
        cJSON_free(text);
        fflush(results);
    }
    cJSON_Delete(rec);
    const TagAccuracy *stop_on = edge > 0 ? &s->in_range : &s->all;
    double within = tag_ratio(stop_on->words_right, stop_on->words);
    return ls->bio ? (TaskScore){"f1", tag_f1(s), within}
                   : (TaskScore){"accuracy", tag_ratio(s->all.words_right, s->all.words), within};
}

TaskScore tagging_predict(TaskRunner *r, TaskData *d, const char *out_path, FILE *results, long step) {
    double t0 = now_seconds();
    const TagSet *set = &d->tags;
    int *pred = xmalloc(sizeof(int) * ((size_t)set->num_words + 1));
    float *prob = xmalloc(sizeof(float) * ((size_t)set->num_words + 1));
    TaskScore score = {NULL, NAN, NAN};
    if (predict_words(r, d, pred, prob)) {
        if (out_path) {
            write_predictions(out_path, &r->tags, set, pred, prob);
            rp_log("predictions for %s written to %s (%.1f s)", d->path, out_path, now_seconds() - t0);
        }
        if (set->labelled && set->num_examples) {
            TagScores s;
            tag_scores_init(&s);
            for (int e = 0; e < set->num_examples; e++) {
                int first = set->first_word[e], n = set->first_word[e + 1] - first;
                tag_scores_add(&s, &r->tags, set->labels + first, pred + first, n,
                               n <= r->cfg.task.train_max_length);
            }
            score = report(r, d, &s, results, step);
            tag_scores_free(&s);
        }
    }
    free(pred);
    free(prob);
    return score;
}
