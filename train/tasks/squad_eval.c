/* The official SQuAD v1.1 evaluation (squad_eval.h). */
#include "train/tasks/squad_eval.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "train/data/basic_tokenizer.h"

/* Python's str.isspace() */
static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Python re's \w for str patterns: letters, digits and numbers, '_' */
static int py_word(uint32_t c) {
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
    return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
           (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

/* Python's string.punctuation: ASCII 33-47, 58-64, 91-96, 123-126 ('_' included) */
static int ascii_punctuation(uint32_t c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

static int cased_letter(uint32_t c) {
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

char *squad_normalize(const char *text) {
    size_t len = strlen(text), n = 0;
    uint32_t *cp = xmalloc(sizeof(uint32_t) * (len + 1));
    for (size_t pos = 0; pos < len;)
        pos += utf8_decode((const unsigned char *)text + pos, len - pos, &cp[n++]);
    /* lower case; capital sigma becomes final sigma after a letter and not before one */
    uint32_t *low = xmalloc(sizeof(uint32_t) * (n + 1));
    for (size_t i = 0; i < n; i++) {
        if (cp[i] == 0x3A3)
            low[i] = i > 0 && cased_letter(cp[i - 1]) && !(i + 1 < n && cased_letter(cp[i + 1])) ? 0x3C2 : 0x3C3;
        else
            low[i] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp[i]);
    }
    /* remove punctuation */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!ascii_punctuation(low[i]))
            low[m++] = low[i];
    /* articles: a whole word run equal to a / an / the becomes one space */
    for (size_t i = 0; i < m;) {
        if (!py_word(low[i]) || (i > 0 && py_word(low[i - 1]))) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < m && py_word(low[j]))
            j++;
        size_t w = j - i;
        int article = (w == 1 && low[i] == 'a') || (w == 2 && low[i] == 'a' && low[i + 1] == 'n') ||
                      (w == 3 && low[i] == 't' && low[i + 1] == 'h' && low[i + 2] == 'e');
        if (article) {
            low[i] = ' ';
            for (size_t k = i + 1; k < j; k++)
                low[k] = 0x20; /* extra spaces vanish in the whitespace step */
        }
        i = j;
    }
    /* split on whitespace, join with single spaces, encode */
    char *out = xmalloc(4 * m + 1);
    size_t used = 0;
    int pending = 0;
    for (size_t i = 0; i < m; i++) {
        if (py_space(low[i])) {
            pending = used > 0;
            continue;
        }
        if (pending)
            out[used++] = ' ';
        pending = 0;
        used += (size_t)utf8proc_encode_char((utf8proc_int32_t)low[i], (utf8proc_uint8_t *)out + used);
    }
    out[used] = '\0';
    free(cp);
    free(low);
    return out;
}

double squad_exact_match(const char *prediction, const char *gold) {
    char *a = squad_normalize(prediction), *b = squad_normalize(gold);
    double em = !strcmp(a, b);
    free(a);
    free(b);
    return em;
}

/* Split a normalized string in place at its single spaces. */
static int split_tokens(char *s, char **tokens) {
    int n = 0;
    while (*s) {
        tokens[n++] = s;
        char *space = strchr(s, ' ');
        if (!space)
            break;
        *space = '\0';
        s = space + 1;
    }
    return n;
}

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

double squad_f1(const char *prediction, const char *gold) {
    char *a = squad_normalize(prediction), *b = squad_normalize(gold);
    char **ta = xmalloc(sizeof(char *) * (strlen(a) + 1)), **tb = xmalloc(sizeof(char *) * (strlen(b) + 1));
    int na = split_tokens(a, ta), nb = split_tokens(b, tb);
    /* multiset intersection by merging the sorted token lists (Counter & Counter) */
    qsort(ta, (size_t)na, sizeof *ta, by_string);
    qsort(tb, (size_t)nb, sizeof *tb, by_string);
    int common = 0;
    for (int i = 0, j = 0; i < na && j < nb;) {
        int c = strcmp(ta[i], tb[j]);
        if (c == 0)
            common++, i++, j++;
        else if (c < 0)
            i++;
        else
            j++;
    }
    double f1 = 0;
    if (common) {
        double precision = (double)common / na, recall = (double)common / nb;
        f1 = 2 * precision * recall / (precision + recall);
    }
    free(ta);
    free(tb);
    free(a);
    free(b);
    return f1;
}

SquadScores squad_evaluate(const SquadSet *set, char *const *predictions) {
    SquadScores s = {0, 0, 0, 0};
    for (int q = 0; q < set->num_questions; q++) {
        const SquadQuestion *question = &set->questions[q];
        if (!question->num_answers)
            continue;
        double em = 0, f1 = 0;
        for (int a = 0; a < question->num_answers; a++) {
            double e = squad_exact_match(predictions[q], question->answers[a]);
            double f = squad_f1(predictions[q], question->answers[a]);
            em = e > em ? e : em;
            f1 = f > f1 ? f : f1;
        }
        s.exact_match += em;
        s.f1 += f1;
        s.scored++;
    }
    /* Questions dropped as malformed count as unanswered: 0, in the denominator. */
    s.unscored = set->num_unscored;
    if (s.scored + s.unscored) {
        s.exact_match *= 100.0 / (s.scored + s.unscored);
        s.f1 *= 100.0 / (s.scored + s.unscored);
    }
    return s;
}
