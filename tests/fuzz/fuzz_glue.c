/* Fuzz target: the GLUE TSV reader (train/tasks/glue.c) with every preset layout and an explicit
 * one, malformed rows skipped (task.bad_examples = skip). The input is a TSV file; each layout
 * must read it or end in an error exit, and every sequence it keeps must be well formed. */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/common.h"
#include "tests/fuzz/fuzz.h"
#include "train/tasks/glue.h"

enum { MAX_SEQ_LEN = 24 };

static const Tokenizer *vocab(void) {
    static Tokenizer *tok;
    if (!tok) {
        const char *path = getenv("FUZZ_VOCAB");
        tok = tokenizer_load(path ? path : "tests/fixtures/finetune/vocab.txt", 1);
    }
    return tok;
}

static void check_features(const TaskFeatures *f, const GlueLayout *g, int rows, int vocab_size) {
    for (int i = 0; i < f->count; i++) {
        int n = f->lengths[i];
        int ok = n >= 2 && n <= f->L && f->type_starts[i] >= 1 && f->type_starts[i] <= n &&
                 f->example[i] >= 0 && f->example[i] < rows;
        for (int t = 0; t < f->L && ok; t++)
            ok = f->input_ids[(size_t)i * f->L + t] >= 0 && f->input_ids[(size_t)i * f->L + t] < vocab_size;
        if (g->type == TASK_CLASSIFICATION)
            ok = ok && f->labels[i] >= 0 && f->labels[i] < g->num_labels;
        else
            ok = ok && isfinite(f->values[i]);
        FUZZ_REQUIRE(ok, "glue: malformed sequence %d (length %d, example %d)", i, n, f->example[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    const Tokenizer *tok = vocab();
    const char *path = fuzz_write_file(data, size, ".tsv");
    static Config cfg;
    config_defaults(&cfg);
    for (volatile int layout = GLUE_NONE; layout <= GLUE_STSB; layout++) {
        cfg.task.glue_task = (GlueTask)layout;
        cfg.task.type = layout == GLUE_STSB ? TASK_REGRESSION : TASK_CLASSIFICATION;
        if (layout == GLUE_NONE) { /* text, text, label of "a b c" in three columns, no header */
            cfg.task.text_a_column = 0, cfg.task.text_b_column = 1, cfg.task.label_column = 2;
            cfg.task.num_columns = 3, cfg.task.header = 0;
            snprintf(cfg.task.labels, sizeof cfg.task.labels, "a b c");
        }
        GlueLayout g = glue_layout(&cfg.task);
        TaskFeatures f;
        features_init(&f, MAX_SEQ_LEN);
        fuzz_begin();
        if (setjmp(fuzz_jump) == 0) {
            int rows = glue_load(&f, &g, path, tok, BAD_SKIP);
            check_features(&f, &g, rows, tokenizer_vocab_size(tok));
            features_free(&f);
            fuzz_end();
        } else {
            fuzz_recover();
        }
    }
    return 0;
}
