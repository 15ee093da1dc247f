/* SQuAD pipeline on hand-made examples: windows with doc_stride (answers at window edges and split
 * across windows), max-context flags, answer offsets in code points (unicode context), the
 * improved answer span, malformed questions, the best span over windows (n-best, max-context,
 * max_answer_length) mapped back to the original text, and the official v1.1 scores. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "train/tasks/squad.h"
#include "train/tasks/squad_eval.h"
#include "tests/check.h"

static const char *VOCAB =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nq\n(\n)\n1895\nthe\nelection\ncafe\n\xe6\x9d\xb1\n\xe4\xba\xac\nis\nbig\n.\n"
    "'\ns\nsteve\nsmith\nco\n##op\n:\nwhere\nw0\nw1\nw2\nw3\nw4\nw5\nw6\nw7\nw8\nw9\nw10\nw11\nw12\nw13\nw14\n"
    "w15\nw16\nw17\nw18\nw19\n";

/* Write JSON text to a temporary file; returns its path (static buffer). */
static const char *temp_json(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/realpos-squad-XXXXXX");
    int fd = mkstemp(path);
    RP_CHECK(fd >= 0, "mkstemp");
    RP_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    return path;
}

static void read_json(SquadSet *set, const char *json, const Tokenizer *tok, int need_answers) {
    const char *path = temp_json(json);
    squad_read(set, path, tok, need_answers, BAD_SKIP);
    unlink(path);
}

static TaskConfig task_config(int L, int stride) {
    TaskConfig c;
    memset(&c, 0, sizeof c);
    c.type = TASK_SQUAD;
    c.max_seq_len = L;
    c.doc_stride = stride;
    c.max_query_length = 64;
    c.n_best_size = 20;
    c.max_answer_length = 30;
    return c;
}

/* 20 one-token words w0..w19, question "q": with L = 10 a window holds 6 context tokens; stride 3
 * gives windows starting at 0, 3, 6, 9, 12, 15 (the last one 5 long). */
static void check_windows(TestTally *t, const Tokenizer *tok) {
    const char *json =
        "{\"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 "
        "w13 w14 w15 w16 w17 w18 w19\", \"qas\": ["
        "{\"id\": \"edge\", \"question\": \"q\", \"answers\": [{\"text\": \"w5 w6\", \"answer_start\": 15}]},"
        "{\"id\": \"split\", \"question\": \"q\", \"answers\": [{\"text\": \"w7 w8 w9 w10\", \"answer_start\": 21}]},"
        "{\"id\": \"last\", \"question\": \"q\", \"answers\": [{\"text\": \"w19\", \"answer_start\": 66}]}]}]}]}";
    SquadSet set;
    read_json(&set, json, tok, 1);
    CHECK(t, set.num_questions == 3 && set.contexts[0].num_tokens == 20, "20-word context read with 3 questions");
    CHECK(t, set.questions[0].start_token == 5 && set.questions[0].end_token == 6 &&
                 set.questions[1].start_token == 7 && set.questions[1].end_token == 10 &&
                 set.questions[2].start_token == 19 && set.questions[2].end_token == 19,
          "answer offsets map to their tokens (5-6, 7-10, 19-19)");
    TaskConfig cfg = task_config(10, 3);
    TaskFeatures f;
    SquadWindows w;
    features_init(&f, 10);
    squad_windows(&set, &cfg, tok, &f, &w);
    CHECK(t, f.count == 18, "6 windows per question (starts 0 3 6 9 12 15), got %d in all", f.count);
    int starts_ok = 1, expect_start[6] = {0, 3, 6, 9, 12, 15}, expect_len[6] = {6, 6, 6, 6, 6, 5};
    for (int j = 0; j < 6; j++) {
        const int *ids = f.input_ids + (size_t)j * 10;
        char want[8];
        snprintf(want, sizeof want, "w%d", expect_start[j]);
        starts_ok &= ids[0] == tokenizer_special(tok).cls && ids[2] == tokenizer_special(tok).sep &&
                     ids[3] == tokenizer_lookup(tok, want) && f.lengths[j] == 3 + expect_len[j] + 1 &&
                     f.type_starts[j] == 3 && w.token_word[j * 10 + 3] == expect_start[j] && w.token_word[j * 10 + 2] < 0;
    }
    CHECK(t, starts_ok, "window layout [CLS] q [SEP] context [SEP], token types and token->word map");
    /* "edge" (tokens 5-6): only the window starting at 3 holds both; at positions 3 + 2, 3 + 3 */
    int edge_ok = f.start[1] == 5 && f.end[1] == 6;
    for (int j = 0; j < 6; j++)
        edge_ok &= j == 1 || (f.start[j] == 0 && f.end[j] == 0);
    CHECK(t, edge_ok, "answer at a window edge: target only in the window that holds it whole, others [CLS]");
    /* "split" (tokens 7-10): window 3-8 cuts it, window 6-11 holds it: 3 + (7-6) .. 3 + (10-6) */
    int split_ok = f.start[6 + 2] == 4 && f.end[6 + 2] == 7;
    for (int j = 0; j < 6; j++)
        split_ok &= j == 2 || (f.start[6 + j] == 0 && f.end[6 + j] == 0);
    CHECK(t, split_ok, "answer split by doc_stride: only the window 6-11 targets it (positions 4-7)");
    CHECK(t, f.start[12 + 5] == 3 + 19 - 15 && f.end[12 + 5] == 7, "answer in the last, shorter window");
    /* max context: token 5 is in windows 0 (score 0 + .06) and 3 (min(2, 3) + .06): window 3;
     * token 7 in 3 (min(4,1)), 6 (min(1,4)): tie, the first (3); token 0 only in window 0 */
    CHECK(t, !w.max_context[0 * 10 + 3 + 5] && w.max_context[1 * 10 + 3 + 2] && w.max_context[1 * 10 + 3 + 4] &&
                 !w.max_context[2 * 10 + 3 + 1] && w.max_context[0 * 10 + 3 + 0],
          "max-context window of a token (best min(left, right) + 0.01 length, first on a tie)");

    /* best span over the windows of "edge": window 1 (tokens 3-8) has the target 5-6 (score 10);
     * window 0 an end before its start (score 18), window 2 a start outside its max context
     * (token 6, score 18), window 1 a 4-token span (score 25) over max_answer_length 2 */
    float *s = xcalloc((size_t)f.count * 10, sizeof(float)), *e = xcalloc((size_t)f.count * 10, sizeof(float));
    for (int i = 0; i < f.count * 10; i++)
        s[i] = e[i] = -20;
#define POS(window, token) ((window) * 10 + 3 + (token) - expect_start[window])
    s[POS(1, 5)] = 5, e[POS(1, 6)] = 5;
    s[POS(0, 4)] = 9, e[POS(0, 2)] = 9;
    s[POS(2, 6)] = 9, e[POS(2, 6)] = 9;
    e[POS(1, 8)] = 20;
#undef POS
    cfg.max_answer_length = 2;
    SquadNbest *nbest = xcalloc((size_t)set.num_questions, sizeof *nbest);
    char **answers = squad_best_answers(&set, &cfg, tok, &f, &w, s, e, nbest);
    CHECK(t, !strcmp(answers[0], "w5 w6"), "best span skips non-max-context starts, end < start and spans over "
          "max_answer_length: got '%s'", answers[0]);
    /* the n best of "edge": the answer first with its logits, distinct texts, scores descending,
     * probabilities the softmax of the scores */
    const SquadNbest *nb = &nbest[0];
    double total = 0, expect_first = 1;
    int ordered = 1, distinct = 1;
    for (int k = 0; k < nb->count; k++) {
        total += nb->items[k].probability;
        if (k)
            ordered &= nb->items[k].start_logit + nb->items[k].end_logit <=
                       nb->items[k - 1].start_logit + nb->items[k - 1].end_logit;
        for (int m = 0; m < k; m++)
            distinct &= strcmp(nb->items[m].text, nb->items[k].text) != 0;
        if (k)
            expect_first += exp((double)nb->items[k].start_logit + nb->items[k].end_logit - 10.0);
    }
    CHECK(t, nb->count > 1 && nb->count <= cfg.n_best_size && !strcmp(nb->items[0].text, answers[0]) &&
          nb->items[0].start_logit == 5 && nb->items[0].end_logit == 5,
          "n-best: %d entries (n_best_size %d), the first is the answer with its logits (got '%s', %g, %g)", nb->count,
          cfg.n_best_size, nb->items[0].text, nb->items[0].start_logit, nb->items[0].end_logit);
    CHECK(t, ordered && distinct, "n-best: scores descending, texts distinct");
    CHECK(t, fabs(total - 1) < 1e-12 && fabs(nb->items[0].probability - 1 / expect_first) < 1e-12,
          "n-best: probabilities sum to 1 (%.15f) and are the softmax of start + end (first %.15f, expected %.15f)",
          total, nb->items[0].probability, 1 / expect_first);
    squad_nbest_free(nbest, set.num_questions);
    SquadScores sc = squad_evaluate(&set, answers);
    CHECK(t, sc.scored == 3, "evaluation counts every question with answers");
    for (int q = 0; q < set.num_questions; q++)
        free(answers[q]);
    free(answers);
    cfg.n_best_size = 1; /* only each window's top start and top end: no valid pair anywhere */
    answers = squad_best_answers(&set, &cfg, tok, &f, &w, s, e, NULL);
    CHECK(t, strcmp(answers[0], "w5 w6"), "n_best_size limits the candidates (n_best 1 gives '%s')", answers[0]);
    for (int q = 0; q < set.num_questions; q++)
        free(answers[q]);
    free(answers);
    free(s);
    free(e);
    features_free(&f);
    squad_windows_free(&w);
    squad_free(&set);
}

static void check_offsets(TestTally *t, const Tokenizer *tok) {
    /* "Ünï 東京 is big." : answer "東京" starts at code point 4 (byte 6); "(1895)" narrows to 1895 */
    const char *json =
        "{\"data\": [{\"paragraphs\": [{\"context\": \"\\u00dcn\\u00ef \\u6771\\u4eac is big. The (1895) election\","
        "\"qas\": [{\"id\": \"u\", \"question\": \"where\", \"answers\": [{\"text\": \"\\u6771\\u4eac\", \"answer_start\": 4}]},"
        "{\"id\": \"year\", \"question\": \"q\", \"answers\": [{\"text\": \"1895\", \"answer_start\": 20}]},"
        "{\"id\": \"bad-start\", \"question\": \"q\", \"answers\": [{\"text\": \"big\", \"answer_start\": 5}]},"
        "{\"id\": \"no-question\", \"answers\": [{\"text\": \"big\", \"answer_start\": 10}]},"
        "{\"question\": \"no id\", \"answers\": []},"
        "{\"id\": \"no-start\", \"question\": \"q\", \"answers\": [{\"text\": \"big\"}]}]}]}]}";
    SquadSet set;
    read_json(&set, json, tok, 1);
    CHECK(t, set.num_questions == 2, "malformed questions (wrong answer_start, no question, no id, no answer_start) "
          "are skipped: %d left", set.num_questions);
    const SquadContext *c = &set.contexts[0];
    /* words: Ünï(unk) 東京 -> 東 京, is, big. -> big . , The -> the, (1895) -> ( 1895 ), election */
    CHECK(t, c->num_words == 7 && c->num_tokens == 11, "context words %d (7), sub-tokens %d (11)", c->num_words,
          c->num_tokens);
    CHECK(t, set.questions[0].start_token == 1 && set.questions[0].end_token == 2,
          "unicode context: answer_start counts code points (tokens %d-%d)", set.questions[0].start_token,
          set.questions[0].end_token);
    CHECK(t, set.questions[1].start_token == 8 && set.questions[1].end_token == 8,
          "improved span: '1895' inside '(1895)' is token 8 alone, not 7-9 (got %d-%d)",
          set.questions[1].start_token, set.questions[1].end_token);
    squad_free(&set);

    /* Evaluation input: the wrong answer_start is answered and scored by its text; the dropped
     * malformed ones with answers count as unanswered. */
    read_json(&set, json, tok, 0);
    CHECK(t, set.num_questions == 3 && set.num_unlocated == 1 && set.num_unscored == 2 &&
                 !strcmp(set.questions[2].id, "bad-start") && !strcmp(set.questions[2].answers[0], "big"),
          "evaluation keeps a question whose answer_start misses its text (%d questions, %d unlocated, %d unscored)",
          set.num_questions, set.num_unlocated, set.num_unscored);
    squad_free(&set);
    const char *dup = "{\"data\": [{\"paragraphs\": [{\"context\": \"a b\", \"qas\": ["
                      "{\"id\": \"x\", \"question\": \"q\", \"answers\": [{\"text\": \"a\", \"answer_start\": 0}]},"
                      "{\"id\": \"x\", \"question\": \"q2\", \"answers\": [{\"text\": \"b\", \"answer_start\": 2}]},"
                      "{\"id\": \"e\", \"question\": \" \", \"answers\": [{\"text\": \"b\", \"answer_start\": 2}]}]}]}]}";
    read_json(&set, dup, tok, 0);
    CHECK(t, set.num_questions == 1 && !strcmp(set.questions[0].question, "q") && set.num_unscored == 2,
          "a repeated question id and an empty question are dropped (%d left, %d unscored)", set.num_questions,
          set.num_unscored);
    squad_free(&set);
}

static void check_final_text(TestTally *t) {
    struct {
        const char *pred, *orig, *want;
        int lower;
    } cases[] = {
        {"cafe", "(Caf\xc3\xa9)", "Caf\xc3\xa9", 1},           /* accents and case come back, brackets go */
        {"smith", "Smith's", "Smith", 1},                      /* part of a word */
        {"steve smith", "Steve Smith's", "Steve Smith", 1},
        {"1895", "(1895)", "1895", 0},
        {"coop", "co\xc2\xadop", "co\xc2\xadop", 1},           /* soft hyphen dropped: lengths differ -> whole */
        {"banana", "Steve", "Steve", 1},                       /* not found -> the original words */
        {"\xe6\x9d\xb1", "\xe6\x9d\xb1\xe4\xba\xac", "\xe6\x9d\xb1", 1}, /* CJK split into characters */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = squad_final_text(cases[i].pred, cases[i].orig, cases[i].lower);
        CHECK(t, !strcmp(got, cases[i].want), "final text of '%s' in '%s' is '%s' (got '%s')", cases[i].pred,
              cases[i].orig, cases[i].want, got);
        free(got);
    }
}

static void check_scores(TestTally *t) {
    struct {
        const char *text, *want;
    } norm[] = {
        {"The  Cat's hat!", "cats hat"},
        {"An apple, a day", "apple day"},
        {"theater anthem", "theater anthem"},
        {"\xc3\x9cN\xc3\x8f  (code)", "\xc3\xbcn\xc3\xaf code"},
        {"under_score a-b", "underscore ab"},
        {"the", ""},
    };
    for (size_t i = 0; i < sizeof norm / sizeof *norm; i++) {
        char *got = squad_normalize(norm[i].text);
        CHECK(t, !strcmp(got, norm[i].want), "normalize('%s') = '%s' (got '%s')", norm[i].text, norm[i].want, got);
        free(got);
    }
    CHECK(t, squad_exact_match("The Cat.", "cat") == 1 && squad_exact_match("cat", "cats") == 0, "exact match");
    double f1 = squad_f1("the cat sat", "cat sat on mat");
    CHECK(t, fabs(f1 - 2 * 1.0 * 0.5 / 1.5) < 1e-12, "F1: P 2/2, R 2/4 -> 2/3 (got %.6f)", f1);
    f1 = squad_f1("x y y y", "y y z");
    CHECK(t, fabs(f1 - 2 * 0.5 * (2.0 / 3) / (0.5 + 2.0 / 3)) < 1e-12,
          "F1 counts repeated tokens as multisets: common 2, P 2/4, R 2/3 (got %.6f)", f1);
    CHECK(t, squad_f1("a", "the") == 0 && squad_exact_match("a", "the") == 1,
          "only articles: F1 0 (no common tokens), EM 1 (both empty)");
    /* a set of two questions: max over gold answers, mean x 100 */
    char *gold0[] = {"Denver Broncos", "Broncos"}, *gold1[] = {"blue house"};
    SquadQuestion qs[2] = {{"a", "q", 0, 2, gold0, 0, 0}, {"b", "q", 0, 1, gold1, 0, 0}};
    SquadSet set = {0, 2, NULL, qs, 0, 0};
    char *pred[2] = {"the Broncos", "house of blue"};
    SquadScores s = squad_evaluate(&set, pred);
    double want_f1 = (1.0 + 2 * (2.0 / 3) * 1.0 / (2.0 / 3 + 1.0)) / 2 * 100;
    CHECK(t, fabs(s.exact_match - 50) < 1e-9 && fabs(s.f1 - want_f1) < 1e-9,
          "EM 50, F1 %.4f over two questions (got %.4f, %.4f)", want_f1, s.exact_match, s.f1);
    set.num_unscored = 2; /* two dropped malformed questions: 0 each, in the denominator */
    s = squad_evaluate(&set, pred);
    CHECK(t, fabs(s.exact_match - 25) < 1e-9 && fabs(s.f1 - want_f1 / 2) < 1e-9 && s.unscored == 2,
          "dropped questions score 0 as the official evaluator's unanswered ones (EM %.4f)", s.exact_match);
}

int main(void) {
    TestTally t = {0, 0};
    Tokenizer *tok = tokenizer_from_text(VOCAB, strlen(VOCAB), 1, "test vocabulary");
    check_windows(&t, tok);
    check_offsets(&t, tok);
    check_final_text(&t);
    check_scores(&t);
    tokenizer_free(tok);
    return tally_exit(&t);
}
