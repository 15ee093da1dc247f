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

typedef enum { UNIT_BLANK, UNIT_SENTENCE, UNIT_RECORD, UNIT_BAD_JSON, UNIT_NO_FIELD,
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
void *grow_to(void *p, size_t *cap, size_t need, size_t elem);
int is_blank(const char *s, size_t n);

/* Cut buf[0, n) into units (lines; CR of CRLF removed); returns their number. */
size_t split_units(Round *r, const char *buf, size_t n);
/* Tokenize units [0, num_units) on all OpenMP threads: kind, sentence count and hash of each
 * unit, ids and sentence lengths in its block. jsonl: each unit is a record whose member `field`
 * holds the document's lines. */
void tokenize_round(Round *r, size_t num_units, const Tokenizer *tok, int jsonl, const char *field);
/* auto: JSON Lines iff the first non-blank line of buf[0, n) is a JSON object. */
int detect_jsonl(const DataConfig *d, const char *buf, size_t n);
void round_free(Round *r);
