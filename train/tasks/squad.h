/* SQuAD v1.1: reading the JSON, context windows, and mapping predicted spans back to text, after
 * google-research/bert's run_squad.py.
 *
 * A context is split at whitespace (space, \t, \r, \n, U+202F) into words; each word is tokenized
 * on its own (basic tokenizer + WordPiece), so every sub-token knows its word. An answer's
 * character offset (in code points, as the JSON counts) gives its first and last word, then its
 * first and last sub-token, narrowed to the sub-tokens that spell exactly the tokenized answer
 * (_improve_answer_span). A question of q tokens (at most max_query_length) and a context of n
 * sub-tokens give windows
 *     [CLS] question [SEP] context[s, s + len) [SEP]        len <= max_seq_len - q - 3,
 * starting at s = 0, doc_stride, 2 doc_stride, ... until one reaches the end. In training a
 * window's target is the answer's sub-tokens, or [CLS] (position 0) for both when the answer is
 * not wholly inside it. A sub-token's "max context" window is the one where
 * min(tokens left, tokens right) + 0.01 len is largest (the first on a tie); predictions only
 * start in a token's max-context window. */
#pragma once
#include "train/config/config.h"
#include "train/tasks/task_data.h"
#include "train/data/tokenizer.h"

typedef struct {
    char *text;          /* UTF-8 */
    int num_words;
    WordSpan *words;     /* byte spans of the whitespace-separated words */
    int num_tokens;      /* sub-tokens of all words */
    int *tokens;         /* [num_tokens] ids */
    int *token_word;     /* [num_tokens] the word each sub-token belongs to */
    int *word_token;     /* [num_words] first sub-token of each word */
} SquadContext;

typedef struct {
    char *id, *question;
    int context;
    int num_answers;     /* 0: unlabelled (predict only) */
    char **answers;      /* gold answer texts */
    int start_token, end_token; /* first answer's sub-tokens in the context (-1 when unlabelled) */
} SquadQuestion;

typedef struct {
    int num_contexts, num_questions;
    SquadContext *contexts;
    SquadQuestion *questions;
    int num_unlocated; /* evaluation questions whose answer_start misses the text: kept, scored by text */
    int num_unscored;  /* evaluation questions skipped as malformed (or a repeated id): scored 0 */
} SquadSet;

/* Per window: for each position the context word it shows (-1 for question, specials, padding),
 * and whether the window is that token's max-context window. */
typedef struct {
    int *token_word;              /* [count, L] */
    unsigned char *max_context;   /* [count, L] */
} SquadWindows;

/* Read a SQuAD v1.1 JSON file. A question without id, with an empty question text, a repeated id,
 * or an answer lacking text or answer_start is reported (file and question id) and skipped or
 * fatal per `policy`; with `need_answers` (training) so is a question without answers or whose
 * answer_start does not point at its text (without: kept and scored by its text, counted in
 * num_unlocated). Malformed JSON, data after the document, or a missing "data" array is fatal. */
void squad_read(SquadSet *set, const char *path, const Tokenizer *tok, int need_answers, BadExamplePolicy policy);
void squad_free(SquadSet *set);
/* Windows of every question into f (example = question index; start/end targets when labelled). */
void squad_windows(const SquadSet *set, const TaskConfig *task, const Tokenizer *tok, TaskFeatures *f,
                   SquadWindows *w);
void squad_windows_free(SquadWindows *w);

/* One of a question's n best answers (nbest_predictions.json). */
typedef struct {
    char *text;
    float start_logit, end_logit;
    double probability; /* softmax of start + end logit over the question's n best */
} SquadCandidate;
typedef struct {
    SquadCandidate *items;
    int count;
} SquadNbest;

/* Best answer text of each question from the windows' start/end logits [count, L] (run_squad.py's
 * write_predictions: the n_best_size highest start and end logits among each window's tokens
 * (run_squad.py ranks its padding too, which then only takes places; here it has none), spans inside
 * the context, starting in their max-context window, end >= start, at most max_answer_length
 * tokens; ranked by start + end logit (ties: window, start rank, end rank, as a stable sort keeps)
 * and mapped back to the original text by squad_final_text; the first n_best_size distinct texts
 * are the n best, and the answer is the first). answers[q] is malloc'd ("empty" when no span
 * qualifies: then its one n-best entry has logits 0 and probability 1). nbest: NULL, or
 * [num_questions] filled (squad_nbest_free). */
char **squad_best_answers(const SquadSet *set, const TaskConfig *task, const Tokenizer *tok,
                          const TaskFeatures *f, const SquadWindows *w, const float *start_logits,
                          const float *end_logits, SquadNbest *nbest);
void squad_nbest_free(SquadNbest *nbest, int num_questions);
/* nbest_predictions.json, as run_squad.py writes it: {"question id": [{"text", "probability",
 * "start_logit", "end_logit"}, ...], ...}, best first. */
void squad_write_nbest(const char *path, const SquadSet *set, const SquadNbest *nbest);
/* Where predict writes the n best beside --out: DIR/nbest_BASENAME (predictions.json ->
 * nbest_predictions.json). */
void squad_nbest_path(char *out, size_t size, const char *predictions_path);
/* run_squad.py's get_final_text: the part of orig_text (original words joined by spaces) that
 * pred_text (the de-tokenized WordPiece span) covers, found by aligning pred_text within the
 * basic-tokenized orig_text with spaces removed; orig_text itself when that fails. malloc'd. */
char *squad_final_text(const char *pred_text, const char *orig_text, int do_lower_case);
/* predictions.json: {"question id": "answer text", ...} */
void squad_write_predictions(const char *path, const SquadSet *set, char *const *answers);
