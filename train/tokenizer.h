/* BERT WordPiece tokenizer, compatible with google-research/bert tokenization.py:
 * BasicTokenizer (clean text, optional lower-casing with NFD accent stripping, punctuation and
 * CJK splitting, whitespace) followed by greedy longest-match-first WordPiece with "##"
 * continuations and [UNK] for words over 100 characters or with no match. */
#pragma once
#include <stddef.h>

typedef struct Tokenizer Tokenizer;

/* Special token ids, looked up in the vocabulary at load time (fatal if any is missing). */
typedef struct {
    int pad, unk, cls, sep, mask;
} SpecialTokens;

/* A word produced by the basic tokenizer, with its byte span in the input text. */
typedef struct {
    size_t start, end; /* [start, end) bytes in the original text */
} WordSpan;

/* Load vocab.txt (one token per line, id = line number). Fatal with the path on error. */
Tokenizer *tokenizer_load(const char *vocab_path, int do_lower_case);
/* Same from the vocabulary text held in memory (e.g. a checkpoint's /vocab); origin names it. */
Tokenizer *tokenizer_from_text(const char *vocab_text, size_t len, int do_lower_case,
                               const char *origin);
void tokenizer_free(Tokenizer *tok);

int tokenizer_vocab_size(const Tokenizer *tok);
int tokenizer_lower_case(const Tokenizer *tok);
SpecialTokens tokenizer_special(const Tokenizer *tok);
/* id of a token string, or -1 */
int tokenizer_lookup(const Tokenizer *tok, const char *token);
const char *tokenizer_token(const Tokenizer *tok, int id);
/* 1 if the token is a "##" continuation piece */
int tokenizer_is_continuation(const Tokenizer *tok, int id);

/* Tokenize `len` bytes of UTF-8 text into ids; returns the number of ids (may exceed `capacity`,
 * in which case only the first `capacity` are written). Invalid UTF-8 bytes are replaced by
 * U+FFFD (documented in the README), never a crash. */
size_t tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int *ids,
                        size_t capacity);
/* Basic tokenizer only: word spans in the original text (after cleaning/splitting). Returns the
 * number of words (writes at most `capacity`). */
size_t tokenizer_basic_words(const Tokenizer *tok, const char *text, size_t len, WordSpan *words,
                             size_t capacity);
/* WordPiece of one basic word (the text of a span as the basic tokenizer normalised it is
 * recomputed internally); returns the number of ids. */
size_t tokenizer_wordpiece(const Tokenizer *tok, const char *word, size_t len, int *ids,
                           size_t capacity);
