/* SQuAD v1.1 scores exactly as the official evaluate-v1.1.py defines them:
 *   normalize(s) = collapse_whitespace(remove_articles(remove_punctuation(lower(s))))
 *     lower: Unicode lower case (with Greek final sigma); punctuation: the 32 ASCII characters of
 *     Python's string.punctuation; articles: the words a, an, the (regex \b(a|an|the)\b, word
 *     characters = Unicode letters, digits and '_') replaced by a space; whitespace: Python's
 *     str.split() set.
 *   EM = [normalize(pred) == normalize(gold)]
 *   F1 = 2 P R / (P + R) over the tokens of the normalized strings, P = common / |pred|,
 *        R = common / |gold|, common = size of the multiset intersection (0 common -> F1 0)
 * A question scores the maximum over its gold answers; the totals are means over questions, x 100. */
#pragma once

#include "train/tasks/squad.h"

/* The normalized form (malloc'd), tokens separated by single spaces. */
char *squad_normalize(const char *text);
double squad_exact_match(const char *prediction, const char *gold);
double squad_f1(const char *prediction, const char *gold);

typedef struct {
    double exact_match, f1; /* x 100 */
    int scored;             /* questions with gold answers */
    int unscored;           /* malformed questions with answers, dropped: scored 0 */
} SquadScores;

/* Scores of predictions[q] for every question of the set that has answers. */
SquadScores squad_evaluate(const SquadSet *set, char *const *predictions);
