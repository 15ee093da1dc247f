/* The SQuAD pipeline end to end on the real data (../shared/data/squad, skipped with a note when
 * absent): with start/end logits that point at each window's training target, the predictions
 * must reproduce the gold answers up to what run_squad.py's mapping cannot express (answers that
 * start or end inside a WordPiece, or longer than max_answer_length): exact match >= 99.5 at
 * windows of 256 and of 128 tokens, doc_stride half of that (more windows, answers split). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "train/tasks/squad.h"
#include "train/tasks/squad_eval.h"
#include "tests/check.h"

static SquadScores oracle(const SquadSet *set, const Tokenizer *tok, int L, int stride, int *windows) {
    TaskConfig c;
    memset(&c, 0, sizeof c);
    c = (TaskConfig){.type = TASK_SQUAD, .max_seq_len = L, .doc_stride = stride, .max_query_length = 64,
                     .n_best_size = 20, .max_answer_length = 30};
    TaskFeatures f;
    SquadWindows w;
    features_init(&f, L);
    squad_windows(set, &c, tok, &f, &w);
    float *s = xcalloc((size_t)f.count * L, sizeof(float)), *e = xcalloc((size_t)f.count * L, sizeof(float));
    for (int i = 0; i < f.count; i++) {
        s[(size_t)i * L + f.start[i]] = 10;
        e[(size_t)i * L + f.end[i]] = 10;
    }
    char **answers = squad_best_answers(set, &c, tok, &f, &w, s, e, NULL);
    SquadScores scores = squad_evaluate(set, answers);
    for (int q = 0; q < set->num_questions; q++)
        free(answers[q]);
    free(answers);
    free(s);
    free(e);
    *windows = f.count;
    features_free(&f);
    squad_windows_free(&w);
    return scores;
}

int main(void) {
    TestTally t = {0, 0};
    const char *data = "../shared/data/squad/eval-half.json", *vocab = "data/vocab/bert-base-uncased.txt";
    if (access(data, R_OK) || access(vocab, R_OK)) {
        printf("SKIP the SQuAD oracle (%s or %s absent: it needs ../shared/data beside the checkout and "
               "`make pretrain`'s vocabulary)\n", data, vocab);
        return tally_exit(&t);
    }
    Tokenizer *tok = tokenizer_load(vocab, 1);
    SquadSet set;
    squad_read(&set, data, tok, 1, BAD_FATAL);
    CHECK(&t, set.num_questions == 5609, "eval-half.json: 5609 questions read, none malformed");
    for (int L = 256; L >= 128; L -= 128) {
        int windows;
        SquadScores s = oracle(&set, tok, L, L / 2, &windows);
        CHECK(&t, s.exact_match >= 99.5 && s.f1 >= 99.5,
              "gold windows mapped back at max_seq_len %d, doc_stride %d (%d windows): EM %.2f, F1 %.2f", L, L / 2,
              windows, s.exact_match, s.f1);
    }
    squad_free(&set);
    tokenizer_free(tok);
    return tally_exit(&t);
}
