/* Vocabulary (open-addressing hash table) and greedy longest-match-first WordPiece. */
#include "train/data/tokenizer.h"

#include <errno.h>
#include <string.h>

#include "core/common.h"
#include "core/io/paths.h"
#include "train/data/basic_tokenizer.h"

/* Slot of the hash table: the token id (-1: empty) and the high half of its hash, which settles
 * almost every mismatch without touching the string. */
typedef struct {
    int32_t id;
    uint32_t tag;
} Slot;

struct Tokenizer {
    int lower_case;
    int size;
    char *strings;    /* every token, NUL-terminated, in id order */
    size_t *offset;   /* [size] start of token id in strings */
    uint32_t *length; /* [size] bytes */
    Slot *slots;      /* [mask + 1], at most half full */
    size_t mask;
    size_t max_length;    /* longest token in bytes: no longer substring needs a look-up */
    uint64_t hash_hashes; /* hash state after the bytes "##" */
    SpecialTokens special;
};

/* 64-bit FNV-1a: h <- (h ^ byte) * prime, from the offset basis. Byte-serial, so the hash of a
 * string can be extended one character at a time. */
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static inline uint64_t hash_extend(uint64_t h, const unsigned char *bytes, size_t len) {
    for (size_t i = 0; i < len; i++)
        h = (h ^ bytes[i]) * FNV_PRIME;
    return h;
}

/* id of the token prefix + bytes[0..len) whose hash is h, or -1; prefix is "" or "##". */
static int lookup_hashed(const Tokenizer *tok, uint64_t h, int hashes_prefix,
                         const unsigned char *bytes, size_t len) {
    size_t prefix = hashes_prefix ? 2 : 0;
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t slot = h & tok->mask;; slot = (slot + 1) & tok->mask) {
        const Slot *s = &tok->slots[slot];
        if (s->id < 0)
            return -1;
        if (s->tag != tag || tok->length[s->id] != len + prefix)
            continue;
        const char *token = tok->strings + tok->offset[s->id];
        if ((!prefix || (token[0] == '#' && token[1] == '#')) &&
            !memcmp(token + prefix, bytes, len))
            return s->id;
    }
}

static void insert(Tokenizer *tok, int id, const char *origin) {
    const unsigned char *token = (const unsigned char *)tok->strings + tok->offset[id];
    uint64_t h = hash_extend(FNV_OFFSET, token, tok->length[id]);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t slot = h & tok->mask;
    for (; tok->slots[slot].id >= 0; slot = (slot + 1) & tok->mask) {
        int other = tok->slots[slot].id;
        if (tok->slots[slot].tag == tag && tok->length[other] == tok->length[id] &&
            !memcmp(tok->strings + tok->offset[other], token, tok->length[id]))
            RP_FATAL("vocabulary %s line %d: token '%s' repeats line %d; every token must appear once (ids are "
                     "line numbers)", origin, id + 1, tok->strings + tok->offset[id], other + 1);
    }
    tok->slots[slot] = (Slot){id, tag};
}

static int is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int valid_utf8(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t used = utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (cp == 0xFFFD && !(used == 3 && !memcmp(s + i, "\xEF\xBF\xBD", 3)))
            return 0;
        i += used;
    }
    return 1;
}

static int special_id(const Tokenizer *tok, const char *name, const char *origin) {
    int id = tokenizer_lookup(tok, name);
    RP_CHECK(id >= 0,
             "vocabulary %s has no %s token (a BERT vocab.txt needs [PAD] [UNK] [CLS] "
             "[SEP] [MASK])",
             origin, name);
    return id;
}

Tokenizer *tokenizer_from_text(const char *text, size_t len, int do_lower_case,
                               const char *origin) {
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (len > 0 && text[len - 1] != '\n')
        lines++; /* last line without a newline */
    RP_CHECK(lines > 0, "vocabulary %s is empty", origin);
    /* BertTokenizer's load_vocab (open(..., encoding="utf-8")) keeps a byte order mark as part of the
     * first token, so that "[PAD]" on line 1 would not be [PAD]: refused, named, not guessed at. */
    RP_CHECK(len < 3 || memcmp(text, "\xEF\xBB\xBF", 3), "vocabulary %s starts with a UTF-8 byte order mark (bytes "
             "EF BB BF, written by some Windows editors): it would be part of the first token, as in HuggingFace's "
             "load_vocab; remove it (e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)", origin);
    RP_CHECK(lines < INT32_MAX, "vocabulary %s has too many lines", origin);

    Tokenizer *tok = xcalloc(1, sizeof *tok);
    tok->lower_case = do_lower_case;
    tok->size = (int)lines;
    tok->strings = xmalloc(len + 1);
    tok->offset = xmalloc(lines * sizeof *tok->offset);
    tok->length = xmalloc(lines * sizeof *tok->length);
    size_t used = 0, line_start = 0;
    for (int id = 0; id < tok->size; id++) {
        const char *nl = memchr(text + line_start, '\n', len - line_start);
        size_t line_end = nl ? (size_t)(nl - text) : len, a = line_start, b = line_end;
        while (a < b && is_ascii_space(text[a]))
            a++;
        while (b > a && is_ascii_space(text[b - 1]))
            b--;
        RP_CHECK(valid_utf8(text + a, b - a), "vocabulary %s line %d: invalid UTF-8", origin,
                 id + 1);
        RP_CHECK(!memchr(text + a, '\0', b - a), "vocabulary %s line %d: NUL byte", origin, id + 1);
        RP_CHECK(b > a, "vocabulary %s line %d: empty line; expected one token per line (ids are line numbers)",
                 origin, id + 1);
        memcpy(tok->strings + used, text + a, b - a);
        tok->offset[id] = used;
        tok->length[id] = (uint32_t)(b - a);
        if (b - a > tok->max_length)
            tok->max_length = b - a;
        used += b - a;
        tok->strings[used++] = '\0';
        line_start = line_end + 1;
    }
    size_t slots = 16;
    while (slots < 2 * lines)
        slots *= 2;
    tok->mask = slots - 1;
    tok->slots = xmalloc(slots * sizeof *tok->slots);
    for (size_t i = 0; i < slots; i++)
        tok->slots[i] = (Slot){-1, 0};
    for (int id = 0; id < tok->size; id++)
        insert(tok, id, origin);
    tok->hash_hashes = hash_extend(FNV_OFFSET, (const unsigned char *)"##", 2);
    tok->special = (SpecialTokens){
        .pad = special_id(tok, "[PAD]", origin),
        .unk = special_id(tok, "[UNK]", origin),
        .cls = special_id(tok, "[CLS]", origin),
        .sep = special_id(tok, "[SEP]", origin),
        .mask = special_id(tok, "[MASK]", origin),
    };
    return tok;
}

Tokenizer *tokenizer_load(const char *vocab_path, int do_lower_case) {
    require_regular_file(vocab_path, "vocabulary");
    FILE *f = fopen(vocab_path, "rb");
    RP_CHECK(f, "%s: cannot open vocabulary: %s", vocab_path, strerror(errno));
    size_t capacity = 1 << 20, len = 0, got;
    char *text = xmalloc(capacity);
    while ((got = fread(text + len, 1, capacity - len, f)) > 0) {
        len += got;
        if (len == capacity) {
            capacity *= 2;
            text = realloc(text, capacity);
            RP_CHECK(text, "out of memory reading vocabulary %s", vocab_path);
        }
    }
    RP_CHECK(!ferror(f), "%s: cannot read vocabulary: %s", vocab_path, strerror(errno));
    fclose(f);
    Tokenizer *tok = tokenizer_from_text(text, len, do_lower_case, vocab_path);
    free(text);
    return tok;
}

void tokenizer_free(Tokenizer *tok) {
    if (!tok)
        return;
    free(tok->strings);
    free(tok->offset);
    free(tok->length);
    free(tok->slots);
    free(tok);
}

int tokenizer_vocab_size(const Tokenizer *tok) { return tok->size; }

Tokenizer *tokenizer_for_model(const char *vocab_text, size_t len, int do_lower_case, const char *origin,
                               int vocab_size, const char *size_key) {
    Tokenizer *tok = tokenizer_from_text(vocab_text, len, do_lower_case, origin);
    RP_CHECK(tok->size == vocab_size, "%s: the vocabulary has %d tokens but %s = %d", origin, tok->size, size_key,
             vocab_size);
    return tok;
}
int tokenizer_lower_case(const Tokenizer *tok) { return tok->lower_case; }
SpecialTokens tokenizer_special(const Tokenizer *tok) { return tok->special; }

int tokenizer_lookup(const Tokenizer *tok, const char *token) {
    size_t len = strlen(token);
    const unsigned char *bytes = (const unsigned char *)token;
    return lookup_hashed(tok, hash_extend(FNV_OFFSET, bytes, len), 0, bytes, len);
}

const char *tokenizer_token(const Tokenizer *tok, int id) {
    RP_CHECK(id >= 0 && id < tok->size, "token id %d outside the vocabulary [0, %d)", id,
             tok->size);
    return tok->strings + tok->offset[id];
}

int tokenizer_is_continuation(const Tokenizer *tok, int id) {
    const char *token = tokenizer_token(tok, id);
    return token[0] == '#' && token[1] == '#';
}

static inline size_t emit(int *ids, size_t capacity, size_t count, int id) {
    if (count < capacity)
        ids[count] = id;
    return count + 1;
}

/* WordPiece of one basic word (`len` bytes of valid UTF-8, `chars` code points), appended at
 * ids[count]; returns the new count. From each start, the longest vocabulary entry
 * word[start, end) (with "##" in front when start > 0) is taken; the hashes of all candidates
 * from one start come from a single pass over the bytes. No match anywhere: one [UNK]. */
static size_t wordpiece_word(const Tokenizer *tok, const unsigned char *word, size_t len,
                             size_t chars, int *ids, size_t capacity, size_t count) {
    if (chars > TOKENIZER_MAX_WORD_CHARS)
        return emit(ids, capacity, count, tok->special.unk);
    size_t word_first = count;
    size_t end[TOKENIZER_MAX_WORD_CHARS];
    uint64_t hash[TOKENIZER_MAX_WORD_CHARS];
    for (size_t start = 0; start < len;) {
        int continuation = start > 0;
        size_t longest = tok->max_length - (continuation && tok->max_length >= 2 ? 2 : 0);
        uint64_t h = continuation ? tok->hash_hashes : FNV_OFFSET;
        size_t candidates = 0;
        for (size_t e = start; e < len && e - start < longest;) {
            h = (h ^ word[e]) * FNV_PRIME;
            e++;
            if (e == len || (word[e] & 0xC0) != 0x80) { /* a code point ends here */
                end[candidates] = e;
                hash[candidates++] = h;
            }
        }
        int id = -1;
        while (id < 0 && candidates > 0) {
            candidates--;
            id = lookup_hashed(tok, hash[candidates], continuation, word + start,
                               end[candidates] - start);
        }
        if (id < 0)
            return emit(ids, capacity, word_first, tok->special.unk);
        count = emit(ids, capacity, count, id);
        start = end[candidates];
    }
    return count;
}

size_t tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int *ids,
                        size_t capacity) {
    BasicTokenizer basic;
    basic_init(&basic, text, len, tok->lower_case);
    size_t count = 0;
    while (basic_next_word(&basic))
        count = wordpiece_word(tok, (const unsigned char *)basic.word, basic.word_len,
                               basic.word_chars, ids, capacity, count);
    basic_release(&basic);
    return count;
}

size_t tokenizer_basic_words(const Tokenizer *tok, const char *text, size_t len, WordSpan *words,
                             size_t capacity) {
    BasicTokenizer basic;
    basic_init(&basic, text, len, tok->lower_case);
    size_t count = 0;
    for (; basic_next_word(&basic); count++)
        if (count < capacity)
            words[count] = (WordSpan){basic.word_start, basic.word_end};
    basic_release(&basic);
    return count;
}

size_t tokenizer_wordpiece(const Tokenizer *tok, const char *word, size_t len, int *ids,
                           size_t capacity) {
    return tokenizer_encode(tok, word, len, ids, capacity);
}

void tokenizer_report_unknown(int64_t unknown, int64_t total, const char *text_origin, const char *vocab_origin) {
    if (total > 0 && (double)unknown > TOKENIZER_UNKNOWN_WARN * (double)total)
        rp_log("warning: %s: %.1f%% of its %lld tokens are [UNK] with vocabulary %s: the vocabulary does not fit "
               "this text (another language or casing, or not text at all)",
               text_origin, 100.0 * (double)unknown / (double)total, (long long)total, vocab_origin);
}
