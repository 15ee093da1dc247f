/* Cutting and tokenizing one round of input (corpus_round.h). */
#include "train/data/corpus_round.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/io/json.h"
#include "core/rng.h"
#include "train/data/basic_tokenizer.h"

void *corpus_round_grow(void *p, size_t *cap, size_t need, size_t elem) {
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

/* Python's str.isspace(): bidirectional class WS, B or S, or category Zs. */
int corpus_round_is_space(uint32_t cp) {
    if (cp < 0x80)
        return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int corpus_round_is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += utf8_decode((const unsigned char *)s + i, n - i, &cp); /* invalid bytes: U+FFFD, not blank */
        if (!corpus_round_is_space(cp))
            return 0;
    }
    return 1;
}

/* Tokenize one sentence into the block; returns 0 on out of memory. */
static int block_sentence(Block *b, const Tokenizer *tok, const char *text, size_t len) {
    int unk = tokenizer_special(tok).unk;
    if (b->cap - b->used < len / 3 + 16) {
        int *grown = corpus_round_grow(b->ids, &b->cap, b->used + len / 3 + 16, sizeof(int));
        if (!grown)
            return 0;
        b->ids = grown;
    }
    size_t n = tokenizer_encode(tok, text, len, b->ids + b->used, b->cap - b->used);
    if (n > b->cap - b->used) {
        int *grown = corpus_round_grow(b->ids, &b->cap, b->used + n, sizeof(int));
        if (!grown)
            return 0;
        b->ids = grown;
        n = tokenizer_encode(tok, text, len, b->ids + b->used, b->cap - b->used);
    }
    int64_t *lens = corpus_round_grow(b->lens, &b->cap_lens, b->num_lens + 1, sizeof(int64_t));
    if (!lens)
        return 0;
    b->lens = lens;
    b->lens[b->num_lens++] = (int64_t)n;
    for (size_t i = 0; i < n; i++)
        b->unknown += b->ids[b->used + i] == unk;
    b->used += n;
    return 1;
}

/* A JSON Lines record: its text member (unescaped into the block's text buffer: NUL characters
 * and all) holds the document's lines. */
static UnitKind tokenize_record(Block *b, const Tokenizer *tok, const char *field, const Unit *u,
                                int32_t *num_sentences, uint64_t *hash) {
    JsonMember member = {field, strlen(field), JSON_INVALID, 0, 0};
    JsonKind kind = json_check(u->text, u->len, &member, NULL, NULL);
    if (kind != JSON_OBJECT)
        return kind == JSON_INVALID ? UNIT_BAD_JSON : UNIT_NOT_OBJECT;
    if (member.kind != JSON_STRING)
        return member.kind == JSON_INVALID ? UNIT_NO_FIELD : UNIT_NOT_STRING;
    char *text = corpus_round_grow(b->text, &b->cap_text, member.len, 1);
    if (!text) {
        b->failed = 1;
        return UNIT_RECORD;
    }
    b->text = text;
    size_t len = json_string_decode(u->text + member.at, member.len, text);
    uint64_t h = 0; /* as walk_round chains a text document's line hashes */
    for (size_t start = 0; start < len && !b->failed;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len, n = end - start;
        n -= n && text[end - 1] == '\r';
        if (!corpus_round_is_blank(text + start, n)) {
            h = hash64(h ^ hash_bytes(text + start, n));
            b->failed = !block_sentence(b, tok, text + start, n);
            ++*num_sentences;
        }
        start = end + 1;
    }
    *hash = h;
    return UNIT_RECORD;
}

void corpus_round_tokenize(Round *r, size_t num_units, const Tokenizer *tok, int jsonl,
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
            if (corpus_round_is_blank(u->text, u->len)) {
                r->kind[i] = UNIT_BLANK;
            } else if (jsonl) {
                r->kind[i] = (unsigned char)tokenize_record(b, tok, field, u, &r->num_sentences[i],
                                                            &r->hash[i]);
            } else {
                r->kind[i] = UNIT_SENTENCE;
                r->hash[i] = hash_bytes(u->text, u->len);
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

size_t corpus_round_split_units(Round *r, const char *buf, size_t n, size_t max_units, size_t *used) {
    size_t count = 0, start = 0;
    while (start < n && count < max_units) {
        const char *nl = memchr(buf + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - buf) : n;
        Unit *units = corpus_round_grow(r->units, &r->cap_units, count + 1, sizeof(Unit));
        RP_CHECK(units, "out of memory splitting the corpus into lines");
        r->units = units;
        size_t len = end - start;
        if (len && buf[end - 1] == '\r')
            len--; /* CRLF */
        r->units[count++] = (Unit){buf + start, len, nl ? end + 1 : end};
        start = nl ? end + 1 : end;
    }
    *used = start;
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

void corpus_round_free(Round *r) {
    for (size_t c = 0; c < r->cap_blocks; c++)
        free(r->blocks[c].ids), free(r->blocks[c].lens), free(r->blocks[c].text);
    free(r->blocks), free(r->units), free(r->kind), free(r->num_sentences), free(r->hash);
}
