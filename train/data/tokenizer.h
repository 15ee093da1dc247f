/* BERT WordPiece tokenizer, compatible with google-research/bert tokenization.py (FullTokenizer):
 * BasicTokenizer (clean text, CJK splitting, whitespace split, optional lower-casing with NFD
 * accent stripping, punctuation split; steps in basic_tokenizer.h) followed by greedy
 * longest-match-first WordPiece with "##" continuations, and [UNK] for a word of more than
 * TOKENIZER_MAX_WORD_CHARS code points or with no match.
 *
 * Invalid UTF-8: each invalid byte is replaced by U+FFFD, which the cleaning step drops (as
 * tokenization.py drops U+FFFD); the result equals tokenization.py on the text that Python's
 * bytes.decode("utf-8", "ignore") gives, and never fails.
 *
 * A loaded Tokenizer is read-only: every function below may be called from several threads. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Words longer than this become [UNK]. The project spec fixes 100, HuggingFace's
 * max_input_chars_per_word; google-research/bert's tokenization.py uses 200, so the two differ
 * only on words of 101-200 characters. */
#define TOKENIZER_MAX_WORD_CHARS 100

typedef struct Tokenizer Tokenizer;

/* Special token ids, looked up in the vocabulary at load time (fatal if any is missing). */
typedef struct {
    int pad, unk, cls, sep, mask;
} SpecialTokens;

/* A word produced by the basic tokenizer, with its byte span in the input text. */
typedef struct {
    size_t start, end; /* [start, end) bytes in the original text */
} WordSpan;

/* Load vocab.txt (one token per line, id = line number; surrounding ASCII whitespace is
 * stripped as tokenization.py's load_vocab strips it; a repeated token looks up to its last id,
 * as in its dict). Fatal with the path on error: not a regular file, unreadable, a UTF-8 byte
 * order mark (it would be part of the first token), invalid UTF-8, missing [PAD] [UNK] [CLS] [SEP]
 * or [MASK]. */
Tokenizer *tokenizer_load(const char *vocab_path, int do_lower_case);
/* Same from the vocabulary text held in memory (e.g. a checkpoint's /vocab); origin names it. */
Tokenizer *tokenizer_from_text(const char *vocab_text, size_t len, int do_lower_case,
                               const char *origin);
void tokenizer_free(Tokenizer *tok);

int tokenizer_vocab_size(const Tokenizer *tok);
/* tokenizer_from_text for a model with vocab_size embeddings: fatal unless the vocabulary has as
 * many tokens ("<origin>: the vocabulary has N tokens but <size_key> = V", size_key naming where
 * V comes from, e.g. "model.vocab_size"). The one vocabulary-size check of every command. */
Tokenizer *tokenizer_for_model(const char *vocab_text, size_t len, int do_lower_case, const char *origin,
                               int vocab_size, const char *size_key);
int tokenizer_lower_case(const Tokenizer *tok);
SpecialTokens tokenizer_special(const Tokenizer *tok);
/* Warn (naming the text and the vocabulary) when more than TOKENIZER_UNKNOWN_WARN of a text's
 * `total` tokens are [UNK]: the vocabulary does not fit the text (wrong language or casing, or
 * binary data). */
#define TOKENIZER_UNKNOWN_WARN 0.10
void tokenizer_report_unknown(int64_t unknown, int64_t total, const char *text_origin, const char *vocab_origin);
/* id of a token string (exact, e.g. "##ing"), or -1 */
int tokenizer_lookup(const Tokenizer *tok, const char *token);
/* token string of an id in [0, vocab size) */
const char *tokenizer_token(const Tokenizer *tok, int id);
/* 1 if the token starts with "##" (a WordPiece continuation, as whole-word masking tests it) */
int tokenizer_is_continuation(const Tokenizer *tok, int id);

/* Tokenize `len` bytes of UTF-8 text into ids; returns the number of ids (may exceed `capacity`,
 * in which case only the first `capacity` are written); never more than `len`. */
size_t tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int *ids,
                        size_t capacity);
/* Basic tokenizer only: word spans in the original text (after cleaning/splitting). Returns the
 * number of words (writes at most `capacity`). A span covers the word's characters, the marks
 * stripped from them and the control characters dropped inside it. */
size_t tokenizer_basic_words(const Tokenizer *tok, const char *text, size_t len, WordSpan *words,
                             size_t capacity);
/* WordPiece of one basic word given by its span in the original text (`word` = text + start,
 * `len` = end - start): the basic tokenizer is re-run on the span, so the result is the same as
 * tokenizer_encode on it. Returns the number of ids (writes at most `capacity`). */
size_t tokenizer_wordpiece(const Tokenizer *tok, const char *word, size_t len, int *ids,
                           size_t capacity);
