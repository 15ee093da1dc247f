/* The one JSON reader of realpos (config.json, tokenizer_config.json, safetensors headers and
 * indexes, SQuAD files, JSON Lines corpus records): a validating scanner (json_check) that
 * applies one set of rules to every JSON text, and cJSON for the trees of whole files.
 *
 * The rules (RFC 8259, made strict where JSON readers disagree):
 *   - exactly one value: anything but whitespace after it is an error (cJSON alone stops at the
 *     end of the value and ignores the rest, so `{...}garbage`, or two JSON Lines records on one
 *     line, would be read as the first);
 *   - no object with a repeated key (compared after unescaping): RFC 8259 leaves the meaning
 *     open, Python's json (hence HuggingFace) keeps the last value, cJSON the first; refusing is
 *     the only reading that agrees with both;
 *   - strings hold no raw control character (U+0000-U+001F must be escaped), escapes are the
 *     RFC's nine; `\u0000` is a NUL character of the string (data: decoded strings carry their
 *     length), and a `\uD800-\uDFFF` escape that is not half of a surrogate pair (which Python's
 *     json.loads accepts) is read as U+FFFD, the replacement character, the one way to hold it in
 *     UTF-8 (the tokenizer then drops it, as it drops invalid UTF-8 bytes);
 *   - NaN and Infinity (Python extensions) are not numbers; nesting deeper than JSON_MAX_DEPTH is
 *     refused (no stack overflow on hostile input).
 * Checked against Python's json.loads (object_pairs_hook for the repeated keys, lone surrogates
 * mapped to U+FFFD) on mutated records: tests/train/data/test_corpus_json.sh (20 000 on every run;
 * 120 000 more once under ASan/UBSan): the same verdict and text on all.
 * Raw bytes inside strings are passed through as they are (the tokenizer reads invalid UTF-8 as
 * U+FFFD). Checking the keys costs O(n) for small objects, O(n log n) for large ones. */
#pragma once
#include <cJSON.h>
#include <stddef.h>

#define JSON_MAX_DEPTH 512

typedef enum { JSON_INVALID = 0, JSON_OBJECT, JSON_ARRAY, JSON_STRING, JSON_NUMBER, JSON_LITERAL } JsonKind;
typedef enum { JSON_ERROR_SYNTAX = 1, JSON_ERROR_TRAILING, JSON_ERROR_DUPLICATE_KEY } JsonErrorKind;

typedef struct {
    JsonErrorKind kind;
    size_t at;          /* byte offset of the error (of the repeated key, of the trailing data) */
    char message[240];  /* what was found and expected, e.g. "key 'text' appears twice in ..." */
} JsonError;

/* A member of the top-level object to find while checking. */
typedef struct {
    const char *name;   /* in */
    size_t name_len;    /* in */
    JsonKind kind;      /* out: its value's kind, JSON_INVALID if the object lacks it */
    size_t at, len;     /* out: its value's bytes in the text (a string's with its quotes) */
} JsonMember;

/* Check text[0, len) against the rules above; returns the kind of its value, or JSON_INVALID
 * with *error filled. member (may be NULL) is looked up among the keys of a top-level object.
 * first_nul (may be NULL) is set to the offset of the first \u0000 escape, or len if none. */
JsonKind json_check(const char *text, size_t len, JsonMember *member, size_t *first_nul, JsonError *error);
/* The characters of the string token text[0, len) (quotes included, as json_check found it) into
 * out (room for len bytes: decoding never grows); returns their byte length. */
size_t json_string_decode(const char *text, size_t len, char *out);

/* Parse len bytes of text (need not be NUL-terminated) into a tree; caller cJSON_Deletes. Fatal,
 * naming the file, what it is, the line and column (and the key), on anything json_check
 * refuses, and on a \u0000 escape (a tree's strings end at their first NUL). */
cJSON *json_parse_strict(const char *text, size_t len, const char *path, const char *what);
/* read_file (regular file checked first) + json_parse_strict. */
cJSON *json_read_file(const char *path, const char *what);
