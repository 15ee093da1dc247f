/* BasicTokenizer of google-research/bert tokenization.py as a word iterator over UTF-8 text
 * (internal to the tokenizer and the vocabulary trainer).
 *
 * The text goes through, in this order (each step exactly as tokenization.py does it):
 *   1. decoding: an invalid UTF-8 byte becomes U+FFFD (and is therefore dropped in step 2; the
 *      text that remains is what Python's bytes.decode("utf-8", "ignore") gives);
 *   2. cleaning: U+0000, U+FFFD and control characters (Cc, Cf except \t \n \r) are dropped
 *      without splitting the word they sit in; \t \n \r, space and Zs separate words (as do Zl/Zp,
 *      which Python's str.split() treats as whitespace);
 *   3. each CJK ideograph (the code point ranges of _is_chinese_char) is a word of its own;
 *   4. lower_case only: str.lower() on each whitespace-separated token (simple lower-case mapping
 *      plus the Final_Sigma rule), NFD, then every Mn (non-spacing mark) is dropped;
 *   5. punctuation split: ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P* are one-character
 *      words; the runs between them are words.
 * A word's span is the byte range of the original text its characters came from; marks dropped
 * in step 4 belong to the character before them. Words are never empty. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* One code point of the current whitespace token, with the bytes of the input it came from. */
typedef struct {
    uint32_t cp;
    size_t start, end;
} SourcedChar;

/* A growable array of SourcedChar that starts in inline storage (no malloc for tokens of up to
 * BASIC_INLINE_CHARS characters). */
#define BASIC_INLINE_CHARS 256
typedef struct {
    SourcedChar *items;
    size_t count, capacity;
    SourcedChar inline_items[BASIC_INLINE_CHARS];
} SourcedChars;

typedef struct {
    const unsigned char *text;
    size_t len, pos; /* input and the decoding cursor */
    int lower_case;
    SourcedChars raw;          /* current whitespace token after steps 1-3 */
    SourcedChars norm;         /* the same after step 4 (unused when !lower_case) */
    const SourcedChars *token; /* &raw or &norm */
    size_t next;               /* first character of *token not yet returned in a word */
    /* the current word (valid after basic_next_word returned 1) */
    char *word;                  /* UTF-8, NUL-terminated */
    size_t word_len;             /* bytes */
    size_t word_chars;           /* code points */
    size_t word_start, word_end; /* span in the input */
    size_t word_capacity;
    char inline_word[4 * BASIC_INLINE_CHARS + 1];
} BasicTokenizer;

/* The tokenizer keeps pointers into itself: initialise it where it will stay. */
void basic_init(BasicTokenizer *basic, const char *text, size_t len, int lower_case);
/* Advance to the next word; 0 at the end of the text. */
int basic_next_word(BasicTokenizer *basic);
/* Free the heap storage of tokens/words longer than the inline buffers. */
void basic_release(BasicTokenizer *basic);

/* Decode one code point at text[0..len) (len >= 1); an invalid sequence yields U+FFFD and
 * consumes one byte. Returns the number of bytes consumed. */
size_t utf8_decode(const unsigned char *text, size_t len, uint32_t *cp);
