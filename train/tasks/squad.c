/* SQuAD v1.1 reading and context windows (squad.h). */
#include "train/tasks/squad.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/json.h"
#include "train/data/basic_tokenizer.h"

/* run_squad.py's is_whitespace */
static int squad_space(uint32_t cp) { return cp == ' ' || cp == '\t' || cp == '\r' || cp == '\n' || cp == 0x202F; }

/* Code-point offsets of a UTF-8 string: byte[i] = start of code point i, byte[n] = len. */
static size_t code_points(const char *text, size_t len, size_t *byte) {
    size_t n = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        if (byte)
            byte[n] = pos;
        pos += utf8_decode((const unsigned char *)text + pos, len - pos, &cp);
        n++;
    }
    if (byte)
        byte[n] = len;
    return n;
}

static void tokenize_context(SquadContext *c, const Tokenizer *tok) {
    size_t len = strlen(c->text);
    c->words = xmalloc(sizeof(WordSpan) * (len / 2 + 1));
    c->num_words = 0;
    int in_word = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        size_t used = utf8_decode((const unsigned char *)c->text + pos, len - pos, &cp);
        if (squad_space(cp)) {
            in_word = 0;
        } else {
            if (!in_word)
                c->words[c->num_words++].start = pos;
            c->words[c->num_words - 1].end = pos + used;
            in_word = 1;
        }
        pos += used;
    }
    c->tokens = xmalloc(sizeof(int) * (len + 1));
    c->token_word = xmalloc(sizeof(int) * (len + 1));
    c->word_token = xmalloc(sizeof(int) * ((size_t)c->num_words + 1));
    c->num_tokens = 0;
    for (int w = 0; w < c->num_words; w++) {
        c->word_token[w] = c->num_tokens;
        size_t n = tokenizer_encode(tok, c->text + c->words[w].start, c->words[w].end - c->words[w].start,
                                    c->tokens + c->num_tokens, len + 1 - (size_t)c->num_tokens);
        for (size_t i = 0; i < n; i++)
            c->token_word[c->num_tokens + (int)i] = w;
        c->num_tokens += (int)n;
    }
    c->word_token[c->num_words] = c->num_tokens;
}

/* run_squad.py's _improve_answer_span: the sub-range of [*start, *end] whose tokens equal the
 * tokenized answer, if any (the first start, then the longest end). */
static void improve_span(const SquadContext *c, const Tokenizer *tok, const char *answer, int *start, int *end) {
    size_t len = strlen(answer);
    int *ids = xmalloc(sizeof(int) * (len + 1));
    int n = (int)tokenizer_encode(tok, answer, len, ids, len + 1);
    for (int s = *start; s <= *end; s++)
        for (int e = *end; e >= s; e--)
            if (e - s + 1 == n && !memcmp(c->tokens + s, ids, sizeof(int) * (size_t)n)) {
                *start = s;
                *end = e;
                free(ids);
                return;
            }
    free(ids);
}

static const char *json_string(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Validate and add one question; returns 0 (after reporting) if it is malformed. */
static int add_question(SquadSet *set, const cJSON *qa, int context, int need_answers, const Tokenizer *tok,
                        BadExamples *bad, int article, int paragraph) {
    const char *id = json_string(qa, "id"), *question = json_string(qa, "question");
    const cJSON *answers = cJSON_GetObjectItemCaseSensitive(qa, "answers");
    int num_answers = cJSON_IsArray(answers) ? cJSON_GetArraySize(answers) : 0;
    int unscored = !need_answers && num_answers > 0; /* if dropped: scored 0 in evaluation */
    if (!id) {
        bad_example(bad, "article %d, paragraph %d: a question without a string \"id\"", article, paragraph);
        set->num_unscored += unscored;
        return 0;
    }
    if (!question || !question[strspn(question, " \t\r\n")]) {
        bad_example(bad, "question %s: %s", id, question ? "an empty \"question\" text" : "no string \"question\"");
        set->num_unscored += unscored;
        return 0;
    }
    if (need_answers && !num_answers) {
        bad_example(bad, "question %s: no \"answers\" (training needs one)", id);
        return 0;
    }
    const SquadContext *c = &set->contexts[context];
    size_t len = strlen(c->text);
    size_t *byte = xmalloc(sizeof(size_t) * (len + 2));
    size_t num_cp = code_points(c->text, len, byte);
    SquadQuestion q = {xstrdup(id), xstrdup(question), context, num_answers,
                       xcalloc((size_t)num_answers + 1, sizeof(char *)), -1, -1};
    int ok = 1, unlocated = 0;
    for (int a = 0; a < num_answers && ok; a++) {
        const cJSON *ans = cJSON_GetArrayItem(answers, a);
        const char *text = json_string(ans, "text");
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(ans, "answer_start");
        if (!text || !cJSON_IsNumber(start)) {
            bad_example(bad, "question %s: answer %d lacks a string \"text\" or a number \"answer_start\"", id, a);
            ok = 0;
            break;
        }
        size_t alen = code_points(text, strlen(text), NULL);
        double s = start->valuedouble;
        int located = s >= 0 && s <= (double)num_cp && s == (double)(size_t)s && (size_t)s + alen <= num_cp &&
                      alen && byte[(size_t)s + alen] - byte[(size_t)s] == strlen(text) &&
                      !memcmp(c->text + byte[(size_t)s], text, strlen(text));
        if (!located && need_answers) { /* training needs the span */
            bad_example(bad, "question %s: answer %d: answer_start %g does not point at its text \"%.60s\"", id, a, s,
                        text);
            ok = 0;
            break;
        }
        /* Evaluation scores by answer text only (as the official evaluator): keep the question. */
        unlocated |= !located;
        q.answers[a] = xstrdup(text);
        if (a == 0 && located) {
            /* words of the first and last character, then their sub-tokens */
            size_t first = byte[(size_t)s], last = byte[(size_t)s + alen - 1];
            int w0 = -1, w1 = -1;
            for (int w = 0; w < c->num_words; w++) {
                if (c->words[w].start <= first)
                    w0 = w;
                if (c->words[w].start <= last)
                    w1 = w;
            }
            if (w0 < 0) {
                bad_example(bad, "question %s: the answer starts before the first word of the context", id);
                ok = 0;
                break;
            }
            q.start_token = c->word_token[w0];
            q.end_token = c->word_token[w1 + 1] - 1;
            if (q.end_token >= q.start_token)
                improve_span(c, tok, text, &q.start_token, &q.end_token);
            else
                q.start_token = q.end_token = -1; /* the words have no tokens (all dropped characters) */
        }
    }
    free(byte);
    if (ok && need_answers && q.start_token < 0) {
        bad_example(bad, "question %s: the answer has no tokens", id);
        ok = 0;
    }
    if (!ok) {
        set->num_unscored += unscored;
        for (int a = 0; a < num_answers; a++)
            free(q.answers[a]);
        free(q.answers);
        free(q.id);
        free(q.question);
        return 0;
    }
    set->num_unlocated += ok && unlocated;
    set->questions[set->num_questions++] = q;
    return 1;
}

static int by_id(const void *a, const void *b) {
    const SquadQuestion *const *x = a, *const *y = b;
    int c = strcmp((*x)->id, (*y)->id);
    return c ? c : (*x < *y ? -1 : *x > *y);
}

/* A question id given twice would make predictions.json hold a key twice: each later one is a
 * bad example (dropped; scored 0 in evaluation). */
static void drop_duplicate_ids(SquadSet *set, BadExamples *bad, int need_answers) {
    int n = set->num_questions;
    SquadQuestion **sorted = xmalloc(sizeof *sorted * ((size_t)n + 1));
    unsigned char *drop = xcalloc((size_t)n + 1, 1);
    for (int q = 0; q < n; q++)
        sorted[q] = &set->questions[q];
    qsort(sorted, (size_t)n, sizeof *sorted, by_id);
    for (int i = 1; i < n; i++)
        if (!strcmp(sorted[i]->id, sorted[i - 1]->id)) {
            bad_example(bad, "question id %s appears more than once (questions %d and %d of the file)", sorted[i]->id,
                        (int)(sorted[i - 1] - set->questions), (int)(sorted[i] - set->questions));
            drop[sorted[i] - set->questions] = 1;
        }
    int kept = 0;
    for (int q = 0; q < n; q++) {
        SquadQuestion *question = &set->questions[q];
        if (!drop[q]) {
            set->questions[kept++] = *question;
            continue;
        }
        set->num_unscored += !need_answers && question->num_answers > 0;
        for (int a = 0; a < question->num_answers; a++)
            free(question->answers[a]);
        free(question->answers);
        free(question->id);
        free(question->question);
    }
    set->num_questions = kept;
    free(drop);
    free(sorted);
}

/* SQuAD v2.0 (unanswerable questions: is_impossible, plausible_answers, version "v2.0") needs a
 * no-answer prediction realpos's span head does not make; reading it as v1.1 would silently drop
 * the unanswerable questions from training and from the score's denominator. */
static void require_squad_v1(const cJSON *root, const cJSON *data, const char *path) {
    const char *version = json_string(root, "version");
    RP_CHECK(!version || strncmp(version, "v2", 2), "%s: \"version\": \"%s\": a SQuAD v2.0 file (unanswerable "
             "questions); realpos reads SQuAD v1.1 only", path, version);
    const cJSON *article, *paragraph, *qa;
    cJSON_ArrayForEach(article, data) {
        cJSON_ArrayForEach(paragraph, cJSON_GetObjectItemCaseSensitive(article, "paragraphs")) {
            cJSON_ArrayForEach(qa, cJSON_GetObjectItemCaseSensitive(paragraph, "qas")) {
                const char *key = cJSON_GetObjectItemCaseSensitive(qa, "is_impossible") ? "is_impossible"
                                  : cJSON_GetObjectItemCaseSensitive(qa, "plausible_answers") ? "plausible_answers"
                                                                                               : NULL;
                const char *id = json_string(qa, "id");
                RP_CHECK(!key, "%s: question %s has \"%s\": a SQuAD v2.0 file (unanswerable questions); realpos reads "
                         "SQuAD v1.1 only", path, id ? id : "(no id)", key);
            }
        }
    }
}

void squad_read(SquadSet *set, const char *path, const Tokenizer *tok, int need_answers, BadExamplePolicy policy) {
    memset(set, 0, sizeof *set);
    size_t size;
    char *text = read_file(path, &size, "SQuAD JSON (task.train_file / dev_file / --input)");
    cJSON *root = json_parse_strict(text, size, path, "SQuAD JSON");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    RP_CHECK(cJSON_IsArray(data), "%s: expected a top-level \"data\" array (SQuAD v1.1 format)", path);
    require_squad_v1(root, data, path);
    int max_contexts = 0, max_questions = 0;
    const cJSON *article, *paragraph;
    cJSON_ArrayForEach(article, data) {
        const cJSON *paragraphs = cJSON_GetObjectItemCaseSensitive(article, "paragraphs");
        cJSON_ArrayForEach(paragraph, paragraphs) {
            max_contexts++;
            max_questions += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(paragraph, "qas"));
        }
    }
    set->contexts = xcalloc((size_t)max_contexts + 1, sizeof(SquadContext));
    set->questions = xcalloc((size_t)max_questions + 1, sizeof(SquadQuestion));
    BadExamples bad = {policy, path, 0};
    int a = 0;
    cJSON_ArrayForEach(article, data) {
        const cJSON *paragraphs = cJSON_GetObjectItemCaseSensitive(article, "paragraphs");
        if (!cJSON_IsArray(paragraphs))
            bad_example(&bad, "article %d: no \"paragraphs\" array", a);
        int p = 0;
        cJSON_ArrayForEach(paragraph, paragraphs) {
            const char *context = json_string(paragraph, "context");
            const cJSON *qas = cJSON_GetObjectItemCaseSensitive(paragraph, "qas");
            if (!context || !cJSON_IsArray(qas)) {
                bad_example(&bad, "article %d, paragraph %d: no string \"context\" or no \"qas\" array", a, p);
                p++;
                continue;
            }
            SquadContext *c = &set->contexts[set->num_contexts];
            c->text = xstrdup(context);
            tokenize_context(c, tok);
            int added = 0;
            const cJSON *qa;
            cJSON_ArrayForEach(qa, qas) added += add_question(set, qa, set->num_contexts, need_answers, tok, &bad, a, p);
            set->num_contexts++;
            (void)added;
            p++;
        }
        a++;
    }
    drop_duplicate_ids(set, &bad, need_answers);
    bad_examples_summary(&bad);
    if (set->num_unlocated)
        rp_log("%s: %d questions whose answer_start does not point at the answer text: answered and scored by the "
               "text, as the official evaluator does", path, set->num_unlocated);
    if (set->num_unscored)
        rp_log("%s: %d malformed questions with answers are skipped and scored 0, as the official evaluator scores "
               "an unanswered question", path, set->num_unscored);
    RP_CHECK(set->num_questions > 0, "%s: no valid questions", path);
    cJSON_Delete(root);
    free(text);
}

void squad_free(SquadSet *set) {
    for (int i = 0; i < set->num_contexts; i++) {
        SquadContext *c = &set->contexts[i];
        free(c->text);
        free(c->words);
        free(c->tokens);
        free(c->token_word);
        free(c->word_token);
    }
    for (int i = 0; i < set->num_questions; i++) {
        SquadQuestion *q = &set->questions[i];
        for (int a = 0; a < q->num_answers; a++)
            free(q->answers[a]);
        free(q->answers);
        free(q->id);
        free(q->question);
    }
    free(set->contexts);
    free(set->questions);
    memset(set, 0, sizeof *set);
}

/* run_squad.py's _check_is_max_context for context token `pos` and window `cur`. */
static int is_max_context(const int *starts, const int *lengths, int num, int cur, int pos) {
    double best = -1;
    int best_window = -1;
    for (int j = 0; j < num; j++) {
        int end = starts[j] + lengths[j] - 1;
        if (pos < starts[j] || pos > end)
            continue;
        int left = pos - starts[j], right = end - pos;
        double score = (left < right ? left : right) + 0.01 * lengths[j];
        if (best_window < 0 || score > best) {
            best = score;
            best_window = j;
        }
    }
    return best_window == cur;
}

static void grow_windows(SquadWindows *w, int capacity, int L) {
    w->token_word = realloc(w->token_word, sizeof(int) * (size_t)capacity * L);
    w->max_context = realloc(w->max_context, (size_t)capacity * L);
    RP_CHECK(w->token_word && w->max_context, "out of memory holding SQuAD windows");
}

void squad_windows(const SquadSet *set, const TaskConfig *task, const Tokenizer *tok, TaskFeatures *f,
                   SquadWindows *w) {
    int L = f->L;
    SpecialTokens sp = tokenizer_special(tok);
    memset(w, 0, sizeof *w);
    int capacity = 0;
    int *query = xmalloc(sizeof(int) * ((size_t)task->max_query_length + 1));
    int max_windows = 0, *starts = NULL, *lengths = NULL;
    for (int qi = 0; qi < set->num_questions; qi++) {
        const SquadQuestion *q = &set->questions[qi];
        const SquadContext *c = &set->contexts[q->context];
        size_t n = tokenizer_encode(tok, q->question, strlen(q->question), query, (size_t)task->max_query_length);
        int len_q = n < (size_t)task->max_query_length ? (int)n : task->max_query_length;
        int max_doc = L - len_q - 3, num = 0;
        /* windows: starts advance by min(length, doc_stride) until one reaches the end */
        for (int start = 0;;) {
            if (num == max_windows) {
                max_windows = max_windows ? 2 * max_windows : 64;
                starts = realloc(starts, sizeof(int) * (size_t)max_windows);
                lengths = realloc(lengths, sizeof(int) * (size_t)max_windows);
                RP_CHECK(starts && lengths, "out of memory");
            }
            int length = c->num_tokens - start < max_doc ? c->num_tokens - start : max_doc;
            starts[num] = start;
            lengths[num++] = length;
            if (start + length >= c->num_tokens)
                break;
            start += length < task->doc_stride ? length : task->doc_stride;
        }
        for (int j = 0; j < num; j++) {
            int i = features_add(f, sp, query, len_q, c->tokens + starts[j], lengths[j], qi);
            if (f->count > capacity) {
                capacity = f->capacity;
                grow_windows(w, capacity, L);
            }
            int *token_word = w->token_word + (size_t)i * L;
            unsigned char *max_context = w->max_context + (size_t)i * L;
            int offset = len_q + 2;
            for (int l = 0; l < L; l++) {
                token_word[l] = -1;
                max_context[l] = 0;
            }
            for (int t = 0; t < lengths[j]; t++) {
                token_word[offset + t] = c->token_word[starts[j] + t];
                max_context[offset + t] = (unsigned char)is_max_context(starts, lengths, num, j, starts[j] + t);
            }
            if (q->start_token >= 0 && q->start_token >= starts[j] && q->end_token < starts[j] + lengths[j]) {
                f->start[i] = q->start_token - starts[j] + offset;
                f->end[i] = q->end_token - starts[j] + offset;
            }
        }
    }
    free(starts);
    free(lengths);
    free(query);
}

void squad_windows_free(SquadWindows *w) {
    free(w->token_word);
    free(w->max_context);
    memset(w, 0, sizeof *w);
}
