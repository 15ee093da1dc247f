/* The fine-tuning task's model, data and batches (task_runner.h). */
#include "train/tasks/task_runner.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "layers/layers.h"
#include "train/model/checkpoint.h"
#include "train/model/transfer.h"

ModelHeads task_runner_heads(const TaskRunner *r) {
    if (r->cfg.task.type == TASK_SQUAD)
        return (ModelHeads){0, 0, 0, 1};
    if (r->cfg.task.type == TASK_TAGGING) /* BertForTokenClassification: no pooler */
        return (ModelHeads){0, 0, r->tags.count, 0};
    return (ModelHeads){0, 1, r->layout.type == TASK_REGRESSION ? 1 : r->layout.num_labels, 0};
}

/* The runner's vocabulary: text (owned from here on), its casing and where it came from. */
static void set_vocab(TaskRunner *r, char *text, int lower, const char *origin) {
    r->vocab_text = text;
    r->cfg.data.do_lower_case = lower;
    r->tok = tokenizer_for_model(r->vocab_text, strlen(r->vocab_text), lower, origin, r->cfg.model.vocab_size,
                                 "model.vocab_size");
    r->special = tokenizer_special(r->tok);
}

void task_runner_fresh(TaskRunner *r, const Config *cfg) {
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    task_runner_derive(r);
    set_vocab(r, read_file(cfg->data.vocab, NULL, "vocabulary (key 'data.vocab')"), cfg->data.do_lower_case,
              cfg->data.vocab);
    model_create(&r->model, &r->cfg.model, task_runner_heads(r));
    model_init_weights(&r->model, (uint64_t)cfg->model.seed);
    task_runner_buffers(r);
}

void task_runner_load_vocab(TaskRunner *r, hid_t file, const char *path, const Config *stored) {
    int lower = stored->data.do_lower_case;
    char *text = checkpoint_read_vocab(file, path, &lower);
    const char *origin = path;
    if (!text) {
        RP_CHECK(stored->data.vocab[0], "%s: no /vocab and no [data] vocab in its config", path);
        text = read_file(stored->data.vocab, NULL, "vocabulary (the checkpoint's [data] vocab)");
        origin = stored->data.vocab;
    }
    set_vocab(r, text, lower, origin);
}

TransferSummary task_runner_build_model(TaskRunner *r, const CheckpointFile *from, int resume, FILE *table) {
    const Config stored = from->cfg;
    const char *ckpt = from->path;
    hid_t f = from->file;
    config_adopt_model(&r->cfg, &stored, ckpt);
    ModelConfig *mc = &r->cfg.model;
    if (mc->absolute_position && r->cfg.task.max_seq_len > mc->max_position) {
        rp_log("task.max_seq_len %d > the checkpoint's model.max_position %d: the absolute position table grows to "
               "%d rows (rows %d-%d newly initialised)", r->cfg.task.max_seq_len, mc->max_position,
               r->cfg.task.max_seq_len, mc->max_position, r->cfg.task.max_seq_len - 1);
        mc->max_position = r->cfg.task.max_seq_len;
    }
    if (!mc->absolute_position && r->cfg.task.max_seq_len > stored.data.max_seq_len)
        rp_log("task.max_seq_len %d is longer than the checkpoint's pretraining sequences (%d): relative positions "
               "only, no change needed", r->cfg.task.max_seq_len, stored.data.max_seq_len);
    task_runner_load_vocab(r, f, ckpt, &stored);
    model_create(&r->model, mc, task_runner_heads(r));
    if (resume) { /* nothing is transferred: the run loads every weight from the checkpoint */
        int64_t step;
        hsize_t one = 1;
        h5_read_int64s(f, ckpt, "train/step", &step, 1, &one);
        rp_log("fine-tuning resumes from %s at step %lld: its weights, not task.init_checkpoint's", ckpt,
               (long long)step);
        return (TransferSummary){0};
    }
    model_init_weights(&r->model, (uint64_t)r->cfg.task.seed);
    TransferSummary moved = transfer_load(f, ckpt, &r->model, "the fine-tuning model", table);
    transfer_note_positions(f, ckpt, mc, &stored.model, "step 0's encoder outputs", table);
    return moved;
}

/* What a classifier's rows mean: row i is label i of the task type it was trained for. */
static void classifier_meaning(const TaskConfig *task, char *out, size_t size) {
    if (task->type == TASK_TAGGING) {
        snprintf(out, size, "tagging with labels %s", task->tag_labels);
        return;
    }
    GlueLayout layout = glue_layout(task); /* a GLUE preset's labels, or task.labels */
    size_t used = (size_t)snprintf(out, size, "%s", task_kind_name(layout.type));
    for (int i = 0; layout.type == TASK_CLASSIFICATION && i < layout.num_labels && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? " " : " with labels ", layout.label_names[i]);
}

void task_runner_check_classifier(const TaskRunner *r, const CheckpointFile *from, const char *what) {
    if (!from->heads.num_labels || !task_runner_heads(r).num_labels)
        return;
    char have[CONFIG_PATH_MAX + 96], want[CONFIG_PATH_MAX + 96];
    classifier_meaning(&from->cfg.task, have, sizeof have);
    classifier_meaning(&r->cfg.task, want, sizeof want);
    RP_CHECK(!strcmp(have, want), "%s (%s): its classifier was trained for %s, this run is %s: row i of a classifier "
             "is label i, so its rows would mean other labels. Give the checkpoint's labels in its order, or start "
             "from a checkpoint without a classifier (e.g. the pretraining checkpoint it was fine-tuned from)",
             from->path, what, have, want);
}

void task_runner_setup(TaskRunner *r, const char *config_path, const char *config_text, int num_sets,
                       char *const *sets) {
    memset(r, 0, sizeof *r);
    if (config_text)
        config_load_text(&r->cfg, JOB_FINETUNE, config_text, config_path, num_sets, sets);
    else
        config_load_task(&r->cfg, config_path, num_sets, sets);
    if (r->cfg.train.threads > 0)
        omp_set_num_threads(r->cfg.train.threads);
    task_runner_derive(r);
}

void task_runner_derive(TaskRunner *r) {
    r->layout = glue_layout(&r->cfg.task);
    if (r->cfg.task.glue_task != GLUE_NONE)
        r->cfg.task.type = r->layout.type;
    r->B = r->cfg.task.batch_size;
    r->L = r->cfg.task.max_seq_len;
    if (r->cfg.task.type == TASK_TAGGING && r->cfg.task.tag_labels[0])
        tag_labels_parse(&r->tags, r->cfg.task.tag_labels, "key 'task.tag_labels'");
}

void task_data_load(TaskData *d, const TaskConfig *task, const GlueLayout *layout, const Tokenizer *tok, int L,
                    const char *path, int need_labels) {
    memset(d, 0, sizeof *d);
    d->path = path;
    features_init(&d->features, L);
    double t0 = now_seconds();
    TagLabels tags;
    if (task->type == TASK_TAGGING) {
        tag_labels_parse(&tags, task->tag_labels, "key 'task.tag_labels'");
        conll_load(&d->features, &d->tags, &tags, path, tok, task->bad_examples);
        rp_log("%s: %d examples, %d words, %d labels%s (%.1f s)", path, d->tags.num_examples, d->tags.num_words,
               tags.count, tags.bio ? " (BIO: entity metrics)" : "", now_seconds() - t0);
        RP_CHECK(!need_labels || d->tags.labelled, "%s: training data needs labels ('word label' lines)", path);
    } else if (task->type == TASK_SQUAD) {
        squad_read(&d->squad, path, tok, need_labels, task->bad_examples);
        squad_windows(&d->squad, task, tok, &d->features, &d->windows);
        rp_log("%s: %d questions in %d contexts -> %d windows of %d tokens (%.1f s)", path, d->squad.num_questions,
               d->squad.num_contexts, d->features.count, L, now_seconds() - t0);
    } else {
        int rows = glue_load(&d->features, layout, path, tok, task->bad_examples), longest = 0;
        for (int i = 0; i < d->features.count; i++)
            longest = d->features.lengths[i] > longest ? d->features.lengths[i] : longest;
        rp_log("%s: %d rows -> %d sequences of at most %d tokens (task.max_seq_len; the longest has %d), %s (%.1f s)",
               path, rows, d->features.count, L, longest,
               task->padding == PAD_NONE      ? "batches unpadded (task.padding = none)"
               : task->padding == PAD_LONGEST ? "each batch padded to its longest sequence"
                                              : "each padded to task.max_seq_len (task.padding = max_length)",
               now_seconds() - t0);
        for (int i = 0; need_labels && i < d->features.count; i++)
            RP_CHECK(d->features.labels[i] >= 0 || !isnan(d->features.values[i]),
                     "%s: training data needs labels (task.label_column = -1)", path);
    }
    /* [UNK] among the text tokens of the sequences ([CLS], [SEP] and padding excluded) */
    int64_t unknown = 0, total = 0;
    SpecialTokens sp = tokenizer_special(tok);
    for (int i = 0; i < d->features.count; i++)
        for (int j = 0; j < d->features.lengths[i]; j++) {
            int id = d->features.input_ids[(size_t)i * L + j];
            unknown += id == sp.unk;
            total += id != sp.cls && id != sp.sep;
        }
    tokenizer_report_unknown(unknown, total, path, "of the checkpoint");
}

void task_data_free(TaskData *d) {
    features_free(&d->features);
    tag_set_free(&d->tags);
    if (d->squad.questions) {
        squad_free(&d->squad);
        squad_windows_free(&d->windows);
    }
    memset(d, 0, sizeof *d);
}

void task_runner_buffers(TaskRunner *r) {
    size_t BL = (size_t)r->B * r->L;
    r->rows = xcalloc((size_t)r->B, sizeof(int));
    r->input_ids = xcalloc(BL, sizeof(int));
    r->token_type_ids = xcalloc(BL, sizeof(int));
    r->attention_mask = xcalloc(BL, sizeof(int));
    r->labels = xcalloc((size_t)r->B, sizeof(int));
    r->start = xcalloc((size_t)r->B, sizeof(int));
    r->end = xcalloc((size_t)r->B, sizeof(int));
    r->values = xcalloc((size_t)r->B, sizeof(float));
    r->token_labels = xcalloc(BL, sizeof(int));
    activations_create(&r->acts, &r->model, r->B, r->L, 0, r->cfg.train.precision); /* the weights are loaded */
    head_buffers_create(&r->heads, &r->model, r->B, r->L);
    batch_layout_create(&r->relayout, r->B, r->L);
}

void task_runner_free(TaskRunner *r) {
    head_buffers_free(&r->heads);
    batch_layout_free(&r->relayout);
    activations_free(&r->acts);
    model_free(&r->model);
    tokenizer_free(r->tok);
    free(r->vocab_text);
    int *ints[] = {r->rows, r->input_ids, r->token_type_ids, r->attention_mask, r->labels, r->start, r->end,
                   r->token_labels};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        free(ints[i]);
    free(r->values);
}

void task_fill_batch(TaskRunner *r, const TaskFeatures *f, const int *rows) {
    RP_CHECK(f->L == r->L, "internal: sequences of %d tokens for a runner of %d", f->L, r->L);
    const PaddingKind padding = r->cfg.task.padding;
    int L = features_batch_length(f, rows, r->B, padding != PAD_MAX_LENGTH);
    features_fill_batch(f, r->special, rows, r->B, L, r->input_ids, r->token_type_ids, r->attention_mask);
    r->batch = (Batch){r->B, L, r->input_ids, r->token_type_ids, r->attention_mask, NULL, NULL};
    if (padding == PAD_NONE)
        r->batch = batch_relayout(&r->relayout, &r->batch, PAD_NONE);
    for (int b = 0; b < r->B; b++) {
        int i = rows[b];
        r->labels[b] = i >= 0 ? f->labels[i] : IGNORE_LABEL;
        r->values[b] = i >= 0 ? f->values[i] : 0.0f;
        r->start[b] = i >= 0 ? f->start[i] : IGNORE_LABEL;
        r->end[b] = i >= 0 ? f->end[i] : IGNORE_LABEL;
        for (int l = 0; f->per_token && l < L; l++)
            r->token_labels[(size_t)b * L + l] = i >= 0 ? f->token_labels[(size_t)i * f->L + l] : IGNORE_LABEL;
    }
}

