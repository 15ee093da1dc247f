/* One round of a source being prepared (corpus_prepare.c): data.read_chunk_mb bytes of its input
 * cut at line ends into units (lines), and the units tokenized in parallel. Blocks of
 * ROUND_UNIT_BLOCK lines are the work items, each with its own buffers, so the ids and sentence
 * lengths, walked in order afterwards, do not depend on the thread count. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/tokenizer.h"

#define ROUND_UNIT_BLOCK 512 /* lines per tokenization work item */

typedef enum { UNIT_BLANK, UNIT_SENTENCE, UNIT_RECORD, UNIT_BAD_JSON, UNIT_NOT_OBJECT, UNIT_NO_FIELD,
               UNIT_NOT_STRING } UnitKind;

typedef struct {
    const char *text; /* the line without '\n' and a trailing '\r' */
    size_t len;
    size_t end;       /* offset after its '\n' in the round's buffer */
} Unit;

typedef struct { /* one work item's output: units [c * ROUND_UNIT_BLOCK, ...) */
    int *ids;
    size_t used, cap;
    int64_t *lens; /* sentence lengths */
    size_t num_lens, cap_lens;
    int64_t unknown;
    char *text;    /* JSON Lines: the record's text member, unescaped */
    size_t cap_text;
    int failed; /* out of memory */
} Block;

typedef struct {
    Unit *units;
    unsigned char *kind;
    int32_t *num_sentences;
    uint64_t *hash;
    size_t cap_units;
    Block *blocks;
    size_t cap_blocks;
} Round;

/* p grown (doubling from 1024) to hold need elements of elem bytes; NULL on out of memory (p
 * is then still valid and *cap unchanged). */
void *corpus_round_grow(void *p, size_t *cap, size_t need, size_t elem);
/* Whitespace as Python's str.isspace() (and str.strip()) has it: ASCII 09-0D, 1C-1F, 20, and
 * U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
int corpus_round_is_space(uint32_t cp);
/* s[0, n) holds only whitespace: a blank line, which ends a text document (every such character
 * tokenizes to nothing). */
int corpus_round_is_blank(const char *s, size_t n);

/* Cut buf[0, n) into at most max_units units (lines; CR of CRLF removed); returns their number,
 * and in *used the bytes they cover (n, or less when max_units was reached). */
size_t corpus_round_split_units(Round *r, const char *buf, size_t n, size_t max_units, size_t *used);
/* Tokenize units [0, num_units) on all OpenMP threads: kind, sentence count and hash of each
 * unit, ids and sentence lengths in its block. jsonl: each unit is a record whose member `field`
 * holds the document's lines. */
void corpus_round_tokenize(Round *r, size_t num_units, const Tokenizer *tok, int jsonl, const char *field);
void corpus_round_free(Round *r);
