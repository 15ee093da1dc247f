/* Cutting and tokenizing one round of input (corpus_round.h). */
#include "train/data/corpus_round.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "train/data/shard_write.h"

void *grow_to(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    p = realloc(p, c * elem);
    if (p)
        *cap = c;
    return p;
}

int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\f\v", s[i]))
            return 0;
    return 1;
}

/* Tokenize one sentence into the block; returns 0 on out of memory. */
static int block_sentence(Block *b, const Tokenizer *tok, const char *text, size_t len) {
    int unk = tokenizer_special(tok).unk;
    if (b->cap - b->used < len / 3 + 16) {
        int *grown = grow_to(b->ids, &b->cap, b->used + len / 3 + 16, sizeof(int));
        if (!grown)
            return 0;
        b->ids = grown;
    }
    size_t n = tokenizer_encode(tok, text, len, b->ids + b->used, b->cap - b->used);
    if (n > b->cap - b->used) {
        int *grown = grow_to(b->ids, &b->cap, b->used + n, sizeof(int));
        if (!grown)
            return 0;
        b->ids = grown;
        n = tokenizer_encode(tok, text, len, b->ids + b->used, b->cap - b->used);
    }
    int64_t *lens = grow_to(b->lens, &b->cap_lens, b->num_lens + 1, sizeof(int64_t));
    if (!lens)
        return 0;
    b->lens = lens;
    b->lens[b->num_lens++] = (int64_t)n;
    for (size_t i = 0; i < n; i++)
        b->unknown += b->ids[b->used + i] == unk;
    b->used += n;
    return 1;
}

/* A JSON Lines record: its text member's lines are the document's sentences. */
static UnitKind tokenize_record(Block *b, const Tokenizer *tok, const char *field, const Unit *u,
                                int32_t *num_sentences, uint64_t *hash) {
    cJSON *rec = cJSON_ParseWithLength(u->text, u->len);
    if (!cJSON_IsObject(rec)) {
        cJSON_Delete(rec);
        return UNIT_BAD_JSON;
    }
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(rec, field);
    UnitKind kind = !item ? UNIT_NO_FIELD : !cJSON_IsString(item) ? UNIT_NOT_STRING : UNIT_RECORD;
    if (kind == UNIT_RECORD) {
        const char *text = item->valuestring;
        size_t len = strlen(text);
        uint64_t h = 0; /* as walk_round chains a text document's line hashes */
        for (size_t start = 0; start < len && !b->failed;) {
            const char *nl = memchr(text + start, '\n', len - start);
            size_t end = nl ? (size_t)(nl - text) : len, n = end - start;
            n -= n && text[end - 1] == '\r';
            if (!is_blank(text + start, n)) {
                h = hash64(h ^ text_hash(text + start, n));
                b->failed = !block_sentence(b, tok, text + start, n);
                ++*num_sentences;
            }
            start = end + 1;
        }
        *hash = h;
    }
    cJSON_Delete(rec);
    return kind;
}

void tokenize_round(Round *r, size_t num_units, const Tokenizer *tok, int jsonl,
                           const char *field) {
    size_t num_blocks = (num_units + ROUND_UNIT_BLOCK - 1) / ROUND_UNIT_BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t c = 0; c < num_blocks; c++) {
        Block *b = &r->blocks[c];
        b->used = b->num_lens = 0;
        b->unknown = 0;
        size_t last = (c + 1) * ROUND_UNIT_BLOCK < num_units ? (c + 1) * ROUND_UNIT_BLOCK : num_units;
        for (size_t i = c * ROUND_UNIT_BLOCK; i < last && !b->failed; i++) {
            const Unit *u = &r->units[i];
            r->num_sentences[i] = 0;
            r->hash[i] = 0;
            if (is_blank(u->text, u->len)) {
                r->kind[i] = UNIT_BLANK;
            } else if (jsonl) {
                r->kind[i] = (unsigned char)tokenize_record(b, tok, field, u, &r->num_sentences[i],
                                                            &r->hash[i]);
            } else {
                r->kind[i] = UNIT_SENTENCE;
                r->hash[i] = text_hash(u->text, u->len);
                r->num_sentences[i] = 1;
                b->failed = !block_sentence(b, tok, u->text, u->len);
            }
        }
    }
    for (size_t c = 0; c < num_blocks; c++)
        RP_CHECK(!r->blocks[c].failed,
                 "out of memory tokenizing the corpus: lower data.read_chunk_mb (%zu ids in a block)",
                 r->blocks[c].cap);
}

/* Cut buf[0, n) into units (lines); returns their number. */
size_t split_units(Round *r, const char *buf, size_t n) {
    size_t count = 0;
    for (size_t start = 0; start < n;) {
        const char *nl = memchr(buf + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - buf) : n;
        Unit *units = grow_to(r->units, &r->cap_units, count + 1, sizeof(Unit));
        RP_CHECK(units, "out of memory splitting the corpus into lines");
        r->units = units;
        size_t len = end - start;
        if (len && buf[end - 1] == '\r')
            len--; /* CRLF */
        r->units[count++] = (Unit){buf + start, len, nl ? end + 1 : end};
        start = end + 1;
    }
    size_t cap = r->cap_units, blocks = (count + ROUND_UNIT_BLOCK - 1) / ROUND_UNIT_BLOCK, old = r->cap_blocks;
    r->kind = realloc(r->kind, cap);
    r->num_sentences = realloc(r->num_sentences, cap * sizeof *r->num_sentences);
    r->hash = realloc(r->hash, cap * sizeof *r->hash);
    RP_CHECK(r->kind && r->num_sentences && r->hash, "out of memory splitting the corpus into lines");
    if (blocks > old) {
        r->blocks = realloc(r->blocks, blocks * sizeof *r->blocks);
        RP_CHECK(r->blocks, "out of memory");
        memset(r->blocks + old, 0, (blocks - old) * sizeof *r->blocks);
        r->cap_blocks = blocks;
    }
    return count;
}

/* auto: JSON Lines iff the first non-blank line is a JSON object. */
int detect_jsonl(const DataConfig *d, const char *buf, size_t n) {
    if (d->corpus_format != CORPUS_AUTO)
        return d->corpus_format == CORPUS_JSONL;
    for (size_t start = 0; start < n;) {
        const char *nl = memchr(buf + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - buf) : n;
        if (!is_blank(buf + start, end - start)) {
            size_t i = start;
            while (i < end && strchr(" \t\r", buf[i]))
                i++;
            if (buf[i] != '{')
                return 0;
            cJSON *j = cJSON_ParseWithLength(buf + start, end - start);
            int object = cJSON_IsObject(j);
            cJSON_Delete(j);
            return object;
        }
        start = end + 1;
    }
    return 0;
}

void round_free(Round *r) {
    for (size_t c = 0; c < r->cap_blocks; c++)
        free(r->blocks[c].ids), free(r->blocks[c].lens);
    free(r->blocks), free(r->units), free(r->kind), free(r->num_sentences), free(r->hash);
}
