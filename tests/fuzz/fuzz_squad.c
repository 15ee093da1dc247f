/* Fuzz target: the SQuAD v1.1 JSON reader (train/tasks/squad.c), its context windows and the
 * mapping of predicted spans back to text (squad_predict.c), with and without answers required,
 * malformed questions skipped. The input is a JSON file; it must be read or end in an error exit.
 * The span logits are a pseudo-random function of the input, so answers of every shape are tried. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "tests/fuzz/fuzz.h"
#include "train/tasks/squad.h"

enum { MAX_SEQ_LEN = 24 };

static void read_and_predict(const char *path, const Tokenizer *tok, const TaskConfig *task, int need_answers,
                             uint64_t seed) {
    SquadSet set;
    squad_read(&set, path, tok, need_answers, BAD_SKIP);
    TaskFeatures f;
    features_init(&f, MAX_SEQ_LEN);
    SquadWindows w;
    squad_windows(&set, task, tok, &f, &w);
    FUZZ_REQUIRE(f.count >= set.num_questions, "fewer windows than questions");
    for (int i = 0; i < f.count; i++)
        FUZZ_REQUIRE(f.example[i] >= 0 && f.example[i] < set.num_questions && f.start[i] >= 0 &&
                    f.end[i] >= f.start[i] && f.end[i] < MAX_SEQ_LEN && f.lengths[i] <= MAX_SEQ_LEN,
                "a window's example or answer positions are out of range");
    size_t n = (size_t)f.count * MAX_SEQ_LEN;
    float *start = xmalloc(n * sizeof *start), *end = xmalloc(n * sizeof *end);
    Rng rng;
    rng_seed(&rng, seed);
    for (size_t e = 0; e < n; e++) {
        start[e] = (float)rng_normal(&rng);
        end[e] = (float)rng_normal(&rng);
    }
    char **answers = squad_best_answers(&set, task, tok, &f, &w, start, end, NULL);
    for (int q = 0; q < set.num_questions; q++) {
        FUZZ_REQUIRE(answers[q] != NULL, "no answer text");
        free(answers[q]);
    }
    free(answers);
    free(start);
    free(end);
    squad_windows_free(&w);
    features_free(&f);
    squad_free(&set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    static Tokenizer *tok;
    static Config cfg;
    if (!tok) {
        const char *path = getenv("FUZZ_VOCAB");
        tok = tokenizer_load(path ? path : "tests/fixtures/finetune/vocab.txt", 1);
        config_defaults(&cfg);
        cfg.task.type = TASK_SQUAD;
        cfg.task.max_seq_len = MAX_SEQ_LEN;
        cfg.task.max_query_length = 8;
        cfg.task.doc_stride = 5;
        cfg.task.max_answer_length = 6;
    }
    uint64_t seed = 0;
    for (size_t i = 0; i < size; i++)
        seed = seed * 131 + data[i];
    const char *path = fuzz_write_file(data, size, ".json");
    for (volatile int need_answers = 0; need_answers < 2; need_answers++) {
        fuzz_begin();
        if (setjmp(fuzz_jump) == 0) {
            read_and_predict(path, tok, &cfg.task, need_answers, seed);
            fuzz_end();
        } else {
            fuzz_recover();
        }
    }
    return 0;
}
