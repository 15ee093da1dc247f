/* Tagging's training-file facts and models trained from scratch (task_runner.h: tagging_prepare,
 * task_runner_build_fresh; task.init_checkpoint = none). */
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "train/model/transfer.h"
#include "train/tasks/task_runner.h"

int task_from_scratch(const TaskConfig *task) { return !strcmp(task->init_checkpoint, "none"); }

/* The vocabulary's size: its lines (a last line without '\n' counts). */
static int count_lines(const char *text) {
    int n = 0;
    const char *s = text;
    for (; *s; s++)
        n += *s == '\n';
    return n + (s > text && s[-1] != '\n');
}

void tagging_prepare(TaskRunner *r, int fresh) {
    TaskConfig *task = &r->cfg.task;
    if (task->type == TASK_TAGGING)
        conll_scan(task, task->train_file);
    if (!fresh) {
        task_runner_derive(r);
        return;
    }
    DataConfig *data = &r->cfg.data;
    ModelConfig *mc = &r->cfg.model;
    if (data->vocab[0]) {
        r->vocab_text = read_file(data->vocab, NULL, "vocabulary (key 'data.vocab')");
    } else {
        RP_CHECK(task->type == TASK_TAGGING, "task.init_checkpoint = none: key 'data.vocab': expected the vocabulary "
                 "of the new model (only a tagging task builds one from its training file)");
        r->vocab_text = conll_vocab(task->train_file, data->do_lower_case);
    }
    int size = count_lines(r->vocab_text);
    RP_CHECK(!config_key_is_set(&r->cfg, "model", "vocab_size") || mc->vocab_size == size,
             "key 'model.vocab_size' = %d, but the vocabulary (%s) has %d tokens: leave the key unset when "
             "task.init_checkpoint = none", mc->vocab_size, data->vocab[0] ? data->vocab : task->train_file, size);
    mc->vocab_size = size;
    if (mc->absolute_position && mc->max_position < task->max_seq_len) {
        RP_CHECK(!config_key_is_set(&r->cfg, "model", "max_position"), "key 'model.max_position' = %d is below "
                 "task.max_seq_len = %d (absolute positions)", mc->max_position, task->max_seq_len);
        mc->max_position = task->max_seq_len;
    }
    data->max_seq_len = task->max_seq_len <= mc->max_position || !mc->absolute_position ? task->max_seq_len
                                                                                          : mc->max_position;
    config_validate(&r->cfg);
    task_runner_derive(r);
    rp_log("task.init_checkpoint = none: a fresh model (model.seed %lld), vocabulary of %d tokens %s%s",
           (long long)mc->seed, size, data->vocab[0] ? "from " : "built from the words of ",
           data->vocab[0] ? data->vocab : task->train_file);
}

TransferSummary task_runner_build_fresh(TaskRunner *r, FILE *table) {
    int lower = r->cfg.data.do_lower_case;
    r->tok = tokenizer_from_text(r->vocab_text, strlen(r->vocab_text), lower, "the fresh model's vocabulary");
    r->special = tokenizer_special(r->tok);
    model_create(&r->model, &r->cfg.model, task_runner_heads(r));
    model_init_weights(&r->model, (uint64_t)r->cfg.model.seed);
    TransferSummary s = {0};
    for (int i = 0; i < r->model.table.count; i++) {
        const ParamInfo *p = &r->model.table.items[i];
        hsize_t dims[2] = {(hsize_t)p->rows, (hsize_t)p->cols};
        if (table)
            transfer_print(table, "initialised", p->name, p->cols ? 2 : 1, dims);
        s.initialised++;
    }
    if (table)
        transfer_print_summary(table, &s);
    return s;
}
