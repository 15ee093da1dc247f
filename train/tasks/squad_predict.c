/* SQuAD predictions: best span over a question's windows and its original text (squad.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "train/data/basic_tokenizer.h"
#include "train/tasks/squad.h"

typedef struct {
    uint32_t *cp;
    size_t n;
} CodePoints;

static CodePoints decode(const char *s) {
    size_t len = strlen(s);
    CodePoints out = {xmalloc(sizeof(uint32_t) * (len + 1)), 0};
    for (size_t pos = 0; pos < len;)
        pos += utf8_decode((const unsigned char *)s + pos, len - pos, &out.cp[out.n++]);
    return out;
}

static char *encode(const uint32_t *cp, size_t n) {
    char *out = xmalloc(4 * n + 1), *p = out;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (c < 0x80) {
            *p++ = (char)c;
        } else if (c < 0x800) {
            *p++ = (char)(0xC0 | c >> 6);
            *p++ = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *p++ = (char)(0xE0 | c >> 12);
            *p++ = (char)(0x80 | (c >> 6 & 0x3F));
            *p++ = (char)(0x80 | (c & 0x3F));
        } else {
            *p++ = (char)(0xF0 | c >> 18);
            *p++ = (char)(0x80 | (c >> 12 & 0x3F));
            *p++ = (char)(0x80 | (c >> 6 & 0x3F));
            *p++ = (char)(0x80 | (c & 0x3F));
        }
    }
    *p = '\0';
    return out;
}

/* Remove U+0020 only (as _strip_spaces); map[i] = index in the input of output character i. */
static size_t strip_spaces(const CodePoints *s, uint32_t *out, size_t *map) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->cp[i] != ' ') {
            out[n] = s->cp[i];
            map[n++] = i;
        }
    return n;
}

char *squad_final_text(const char *pred_text, const char *orig_text, int do_lower_case) {
    /* tok_text: the basic tokenizer's words of orig_text joined by spaces */
    size_t orig_len = strlen(orig_text);
    char *joined = xmalloc(8 * orig_len + 8);
    size_t used = 0;
    BasicTokenizer *basic = xmalloc(sizeof *basic);
    basic_init(basic, orig_text, orig_len, do_lower_case);
    while (basic_next_word(basic)) {
        if (used)
            joined[used++] = ' ';
        memcpy(joined + used, basic->word, basic->word_len);
        used += basic->word_len;
    }
    joined[used] = '\0';
    basic_release(basic);
    free(basic);
    CodePoints tok = decode(joined), pred = decode(pred_text), orig = decode(orig_text);
    free(joined);
    char *result = NULL;
    /* start = tok_text.find(pred_text) */
    long start = -1;
    for (size_t i = 0; pred.n && i + pred.n <= tok.n && start < 0; i++)
        if (!memcmp(tok.cp + i, pred.cp, sizeof(uint32_t) * pred.n))
            start = (long)i;
    if (!pred.n)
        start = 0; /* "".find("") == 0 */
    uint32_t *orig_ns = xmalloc(sizeof(uint32_t) * (orig.n + 1)), *tok_ns = xmalloc(sizeof(uint32_t) * (tok.n + 1));
    size_t *orig_map = xmalloc(sizeof(size_t) * (orig.n + 1)), *tok_map = xmalloc(sizeof(size_t) * (tok.n + 1));
    size_t orig_ns_n = strip_spaces(&orig, orig_ns, orig_map), tok_ns_n = strip_spaces(&tok, tok_ns, tok_map);
    if (start >= 0 && orig_ns_n == tok_ns_n) {
        long end = start + (long)pred.n - 1;
        /* tok index -> non-space index (absent for a space), then non-space -> orig index */
        long ns_start = -1, ns_end = -1;
        for (size_t k = 0; k < tok_ns_n; k++) {
            if ((long)tok_map[k] == start)
                ns_start = (long)k;
            if ((long)tok_map[k] == end)
                ns_end = (long)k;
        }
        if (ns_start >= 0 && ns_end >= 0 && ns_end >= ns_start) {
            size_t a = orig_map[ns_start], b = orig_map[ns_end];
            result = encode(orig.cp + a, b - a + 1);
        }
    }
    free(orig_ns);
    free(tok_ns);
    free(orig_map);
    free(tok_map);
    free(tok.cp);
    free(pred.cp);
    free(orig.cp);
    return result ? result : xstrdup(orig_text);
}

/* Indices of the n largest values (ties: lower index first, as a stable sort gives). */
static int top_indices(const float *x, int L, int n, int *out) {
    int count = 0;
    for (int i = 0; i < L; i++) {
        int pos = count < n ? count++ : n;
        if (pos == n && !(x[i] > x[out[n - 1]]))
            continue;
        if (pos == n)
            pos = n - 1;
        while (pos > 0 && x[i] > x[out[pos - 1]]) {
            out[pos] = out[pos - 1];
            pos--;
        }
        out[pos] = i;
    }
    return count;
}

/* "tok ##en ##s" -> "tokens": join with spaces, drop " ##" then "##", collapse whitespace. */
static char *detokenize(const Tokenizer *tok, const int *ids, int n) {
    size_t size = 1;
    for (int i = 0; i < n; i++)
        size += strlen(tokenizer_token(tok, ids[i])) + 1;
    char *joined = xmalloc(size), *out = xmalloc(size);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            joined[used++] = ' ';
        const char *t = tokenizer_token(tok, ids[i]);
        memcpy(joined + used, t, strlen(t));
        used += strlen(t);
    }
    joined[used] = '\0';
    size_t o = 0;
    for (size_t i = 0; i < used;) {
        if (!strncmp(joined + i, " ##", 3))
            i += 3;
        else
            joined[o++] = joined[i++];
    }
    joined[o] = '\0';
    used = o;
    o = 0;
    for (size_t i = 0; i < used;) {
        if (!strncmp(joined + i, "##", 2))
            i += 2;
        else
            joined[o++] = joined[i++];
    }
    joined[o] = '\0';
    /* split on whitespace and join with single spaces (strip included) */
    used = 0;
    for (char *s = joined; *s;) {
        s += strspn(s, " \t\r\n\v\f");
        size_t len = strcspn(s, " \t\r\n\v\f");
        if (!len)
            break;
        if (used)
            out[used++] = ' ';
        memcpy(out + used, s, len);
        used += len;
        s += len;
    }
    out[used] = '\0';
    free(joined);
    return out;
}

/* A candidate span of a question: window (feature), start and end token, start + end logit. */
typedef struct {
    int feature, start, end, order;
    float score;
} Span;

static int by_score(const void *pa, const void *pb) { /* descending; ties keep their order (stable) */
    const Span *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* The original-text answer of a span (squad_final_text of its WordPieces within its words). */
static char *span_text(const SquadSet *set, int qi, const Tokenizer *tok, const TaskFeatures *f,
                       const SquadWindows *w, const Span *span) {
    int L = f->L;
    const SquadContext *c = &set->contexts[set->questions[qi].context];
    const int *ids = f->input_ids + (size_t)span->feature * L;
    char *pred = detokenize(tok, ids + span->start, span->end - span->start + 1);
    const int *token_word = w->token_word + (size_t)span->feature * L;
    int w0 = token_word[span->start], w1 = token_word[span->end];
    size_t size = 1; /* the original words joined by single spaces */
    for (int k = w0; k <= w1; k++)
        size += c->words[k].end - c->words[k].start + 1;
    char *orig = xmalloc(size);
    size_t used = 0;
    for (int k = w0; k <= w1; k++) {
        if (k > w0)
            orig[used++] = ' ';
        memcpy(orig + used, c->text + c->words[k].start, c->words[k].end - c->words[k].start);
        used += c->words[k].end - c->words[k].start;
    }
    orig[used] = '\0';
    char *text = squad_final_text(pred, orig, tokenizer_lower_case(tok));
    free(pred);
    free(orig);
    return text;
}

char **squad_best_answers(const SquadSet *set, const TaskConfig *task, const Tokenizer *tok,
                          const TaskFeatures *f, const SquadWindows *w, const float *start_logits,
                          const float *end_logits, SquadNbest *nbest) {
    int L = f->L, n_best = task->n_best_size < L ? task->n_best_size : L;
    char **answers = xcalloc((size_t)set->num_questions, sizeof(char *));
    int *starts = xmalloc(sizeof(int) * (size_t)n_best), *ends = xmalloc(sizeof(int) * (size_t)n_best);
    int cap = 64;
    Span *spans = xmalloc(sizeof(Span) * (size_t)cap);
    SquadCandidate *best = xmalloc(sizeof(SquadCandidate) * (size_t)(n_best + 1));
    int i = 0;
    for (int qi = 0; qi < set->num_questions; qi++) {
        /* every valid candidate pair of every window, in (window, start rank, end rank) order */
        int num_spans = 0;
        for (; i < f->count && f->example[i] == qi; i++) {
            const float *s = start_logits + (size_t)i * L, *e = end_logits + (size_t)i * L;
            const int *token_word = w->token_word + (size_t)i * L;
            const unsigned char *max_context = w->max_context + (size_t)i * L;
            /* candidates among the sequence's own tokens: padding never takes an n-best place */
            int ns = top_indices(s, f->lengths[i], n_best, starts), ne = top_indices(e, f->lengths[i], n_best, ends);
            for (int a = 0; a < ns; a++)
                for (int b = 0; b < ne; b++) {
                    int st = starts[a], en = ends[b];
                    if (st >= f->lengths[i] || en >= f->lengths[i] || token_word[st] < 0 || token_word[en] < 0 ||
                        !max_context[st] || en < st || en - st + 1 > task->max_answer_length)
                        continue;
                    if (num_spans == cap)
                        spans = realloc(spans, sizeof(Span) * (size_t)(cap *= 2));
                    RP_CHECK(spans, "out of memory ranking the answers of question %d", qi);
                    spans[num_spans] = (Span){i, st, en, num_spans, s[st] + e[en]};
                    num_spans++;
                }
        }
        qsort(spans, (size_t)num_spans, sizeof *spans, by_score);
        /* the first n_best distinct texts, best first */
        int count = 0;
        for (int k = 0; k < num_spans && count < n_best; k++) {
            char *text = span_text(set, qi, tok, f, w, &spans[k]);
            int seen = 0;
            for (int m = 0; m < count && !seen; m++)
                seen = !strcmp(best[m].text, text);
            if (seen) {
                free(text);
                continue;
            }
            const Span *sp = &spans[k];
            best[count++] = (SquadCandidate){text, start_logits[(size_t)sp->feature * L + sp->start],
                                             end_logits[(size_t)sp->feature * L + sp->end], 0};
        }
        if (!count)
            best[count++] = (SquadCandidate){xstrdup("empty"), 0, 0, 0};
        /* p_k = exp(s_k - max s) / sum_k' exp(s_k' - max s), s = start + end logit, in double */
        double top = (double)best[0].start_logit + best[0].end_logit, sum = 0;
        for (int k = 0; k < count; k++)
            sum += exp((double)best[k].start_logit + best[k].end_logit - top);
        for (int k = 0; k < count; k++)
            best[k].probability = exp((double)best[k].start_logit + best[k].end_logit - top) / sum;
        answers[qi] = xstrdup(best[0].text);
        if (nbest) {
            nbest[qi].count = count;
            nbest[qi].items = xmalloc(sizeof(SquadCandidate) * (size_t)count);
            memcpy(nbest[qi].items, best, sizeof(SquadCandidate) * (size_t)count);
        } else {
            for (int k = 0; k < count; k++)
                free(best[k].text);
        }
    }
    free(best);
    free(spans);
    free(starts);
    free(ends);
    return answers;
}

void squad_nbest_free(SquadNbest *nbest, int num_questions) {
    for (int q = 0; q < num_questions; q++) {
        for (int k = 0; k < nbest[q].count; k++)
            free(nbest[q].items[k].text);
        free(nbest[q].items);
    }
    free(nbest);
}

static void write_json(const char *path, cJSON *root) {
    char *text = cJSON_Print(root);
    RP_CHECK(text, "out of memory formatting %s", path);
    size_t len = strlen(text);
    char *whole = xmalloc(len + 2);
    memcpy(whole, text, len);
    whole[len] = '\n';
    write_file(path, whole, len + 1); /* whole or not at all, with the reason on failure */
    free(whole);
    cJSON_free(text);
    cJSON_Delete(root);
}

void squad_write_nbest(const char *path, const SquadSet *set, const SquadNbest *nbest) {
    cJSON *root = cJSON_CreateObject();
    for (int q = 0; q < set->num_questions; q++) {
        cJSON *list = cJSON_CreateArray();
        for (int k = 0; k < nbest[q].count; k++) {
            const SquadCandidate *c = &nbest[q].items[k];
            cJSON *entry = cJSON_CreateObject();
            cJSON_AddStringToObject(entry, "text", c->text);
            cJSON_AddNumberToObject(entry, "probability", c->probability);
            cJSON_AddNumberToObject(entry, "start_logit", c->start_logit);
            cJSON_AddNumberToObject(entry, "end_logit", c->end_logit);
            cJSON_AddItemToArray(list, entry);
        }
        cJSON_AddItemToObject(root, set->questions[q].id, list);
    }
    write_json(path, root);
}

void squad_nbest_path(char *out, size_t size, const char *predictions_path) {
    const char *slash = strrchr(predictions_path, '/');
    size_t dir = slash ? (size_t)(slash - predictions_path) + 1 : 0;
    int n = snprintf(out, size, "%.*snbest_%s", (int)dir, predictions_path, predictions_path + dir);
    RP_CHECK(n > 0 && (size_t)n < size, "%s: path too long", predictions_path);
}

void squad_write_predictions(const char *path, const SquadSet *set, char *const *answers) {
    cJSON *root = cJSON_CreateObject();
    for (int q = 0; q < set->num_questions; q++)
        cJSON_AddItemToObject(root, set->questions[q].id, cJSON_CreateString(answers[q]));
    write_json(path, root);
}
