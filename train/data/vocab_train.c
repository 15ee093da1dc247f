/* WordPiece vocabulary training by frequency merges (see vocab_train.h).
 *
 * State: the distinct words with their counts, each as a sequence of piece ids; for every
 * adjacent pair of pieces (a, b) its frequency = sum of the counts of the words it occurs in
 * (with multiplicity) and the list of words it was ever seen in; a max-heap of pairs by
 * frequency with lazy deletion (an entry whose frequency is out of date is dropped or re-pushed
 * when it reaches the top). Merging (a, b) -> c rewrites only the words on the pair's list and
 * updates only the pairs next to a merge, so a merge costs time in the words it changes. */
#include "train/data/vocab_train.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

#include "core/common.h"
#include "core/io/paths.h"
#include "train/data/basic_tokenizer.h"
#include "train/data/tokenizer.h"

static const char *const special_tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
enum { SPECIAL_COUNT = 5, MIN_PAIR_FREQUENCY = 2 };

static void *grow(void *items, size_t *capacity, size_t needed, size_t item_size) {
    if (needed <= *capacity)
        return items;
    size_t capacity_new = *capacity ? *capacity : 16;
    while (capacity_new < needed)
        capacity_new *= 2;
    void *grown = realloc(items, capacity_new * item_size);
    RP_CHECK(grown, "vocab: out of memory (%zu x %zu bytes)", capacity_new, item_size);
    *capacity = capacity_new;
    return grown;
}

/* ---- interned strings: string -> dense index (open addressing, FNV-1a) ---- */
typedef struct {
    char *bytes; /* all strings, NUL-terminated, back to back */
    size_t bytes_len, bytes_capacity;
    size_t *offset; /* [count] */
    uint64_t *hash; /* [count] */
    size_t count, capacity;
    int32_t *slots; /* index or -1; at most half full */
    size_t mask;
} StringTable;

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static void strings_rehash(StringTable *t, size_t slot_count) {
    free(t->slots);
    t->slots = xmalloc(slot_count * sizeof *t->slots);
    memset(t->slots, 0xff, slot_count * sizeof *t->slots);
    t->mask = slot_count - 1;
    for (size_t i = 0; i < t->count; i++) {
        size_t slot = t->hash[i] & t->mask;
        while (t->slots[slot] >= 0)
            slot = (slot + 1) & t->mask;
        t->slots[slot] = (int32_t)i;
    }
}

/* Index of the string, adding it if new (*added tells which). */
static int32_t strings_intern(StringTable *t, const char *s, size_t len, int *added) {
    if (2 * (t->count + 1) > t->mask + 1)
        strings_rehash(t, t->mask ? 2 * (t->mask + 1) : 1024);
    uint64_t h = hash_bytes(s, len);
    size_t slot = h & t->mask;
    for (; t->slots[slot] >= 0; slot = (slot + 1) & t->mask) {
        int32_t i = t->slots[slot];
        const char *other = t->bytes + t->offset[i];
        if (t->hash[i] == h && !memcmp(other, s, len) && other[len] == '\0') {
            *added = 0;
            return i;
        }
    }
    RP_CHECK(t->count < INT32_MAX, "vocab: too many distinct strings");
    t->bytes = grow(t->bytes, &t->bytes_capacity, t->bytes_len + len + 1, 1);
    memcpy(t->bytes + t->bytes_len, s, len);
    t->bytes[t->bytes_len + len] = '\0';
    if (t->count == t->capacity) {
        size_t capacity = t->capacity; /* both arrays grow to the same capacity */
        t->offset = grow(t->offset, &capacity, t->count + 1, sizeof *t->offset);
        t->hash = grow(t->hash, &t->capacity, t->count + 1, sizeof *t->hash);
    }
    t->offset[t->count] = t->bytes_len;
    t->hash[t->count] = h;
    t->bytes_len += len + 1;
    t->slots[slot] = (int32_t)t->count;
    *added = 1;
    return (int32_t)t->count++;
}

static const char *strings_get(const StringTable *t, int32_t i) { return t->bytes + t->offset[i]; }

static void strings_free(StringTable *t) {
    free(t->bytes);
    free(t->offset);
    free(t->hash);
    free(t->slots);
}

/* ---- trainer state ---- */
typedef struct {
    int64_t count; /* occurrences in the corpus */
    size_t first;  /* its pieces are pieces[first .. first + length) */
    uint32_t length;
    uint32_t visited; /* merge step that last rewrote it (dedupes the pair word lists) */
} Word;

typedef struct {
    int32_t left, right;
    int64_t frequency;
    uint32_t *words; /* words the pair was seen in (may be stale, may repeat) */
    size_t word_count, word_capacity;
    uint32_t raised; /* merge step in which its frequency last went up */
} Pair;

typedef struct {
    int64_t frequency;
    int32_t left, right, pair;
} HeapEntry;

typedef struct {
    StringTable word_text, pieces_text; /* distinct words; piece strings (piece id = index) */
    Word *words;
    size_t word_capacity;
    int32_t *pieces;
    size_t pieces_len, pieces_capacity;
    Pair *pairs;
    size_t pair_count, pair_capacity;
    int32_t *pair_slots; /* pair index or -1 */
    size_t pair_mask;
    HeapEntry *heap;
    size_t heap_count, heap_capacity;
    int32_t *raised; /* pairs whose frequency went up in this step */
    size_t raised_count, raised_capacity;
    uint32_t step;
} Trainer;

static size_t pair_slot_of(int32_t left, int32_t right, size_t mask) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static void pairs_rehash(Trainer *t, size_t slot_count) {
    free(t->pair_slots);
    t->pair_slots = xmalloc(slot_count * sizeof *t->pair_slots);
    memset(t->pair_slots, 0xff, slot_count * sizeof *t->pair_slots);
    t->pair_mask = slot_count - 1;
    for (size_t i = 0; i < t->pair_count; i++) {
        size_t slot = pair_slot_of(t->pairs[i].left, t->pairs[i].right, t->pair_mask);
        while (t->pair_slots[slot] >= 0)
            slot = (slot + 1) & t->pair_mask;
        t->pair_slots[slot] = (int32_t)i;
    }
}

/* frequency(left, right) += delta; a rise also records the word and marks the pair raised. */
static void pair_add(Trainer *t, int32_t left, int32_t right, int64_t delta, uint32_t word) {
    if (2 * (t->pair_count + 1) > t->pair_mask + 1)
        pairs_rehash(t, t->pair_mask ? 2 * (t->pair_mask + 1) : 1 << 16);
    size_t slot = pair_slot_of(left, right, t->pair_mask);
    Pair *pair = NULL;
    for (; t->pair_slots[slot] >= 0; slot = (slot + 1) & t->pair_mask) {
        Pair *p = &t->pairs[t->pair_slots[slot]];
        if (p->left == left && p->right == right) {
            pair = p;
            break;
        }
    }
    if (!pair) {
        RP_CHECK(t->pair_count < INT32_MAX, "vocab: too many distinct pairs");
        t->pairs = grow(t->pairs, &t->pair_capacity, t->pair_count + 1, sizeof *t->pairs);
        t->pair_slots[slot] = (int32_t)t->pair_count;
        pair = &t->pairs[t->pair_count++];
        *pair = (Pair){.left = left, .right = right, .raised = UINT32_MAX};
    }
    pair->frequency += delta;
    if (delta > 0) {
        if (!pair->word_count || pair->words[pair->word_count - 1] != word) {
            pair->words =
                grow(pair->words, &pair->word_capacity, pair->word_count + 1, sizeof *pair->words);
            pair->words[pair->word_count++] = word;
        }
        if (pair->raised != t->step) {
            pair->raised = t->step;
            t->raised =
                grow(t->raised, &t->raised_capacity, t->raised_count + 1, sizeof *t->raised);
            t->raised[t->raised_count++] = (int32_t)(pair - t->pairs);
        }
    }
}

/* Max-heap order: higher frequency first, then the smaller (left, right) piece ids. */
static int heap_before(HeapEntry a, HeapEntry b) {
    if (a.frequency != b.frequency)
        return a.frequency > b.frequency;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
}

static void heap_push(Trainer *t, int32_t pair) {
    t->heap = grow(t->heap, &t->heap_capacity, t->heap_count + 1, sizeof *t->heap);
    const Pair *p = &t->pairs[pair];
    HeapEntry entry = {p->frequency, p->left, p->right, pair};
    size_t i = t->heap_count++;
    while (i > 0 && heap_before(entry, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = entry;
}

static HeapEntry heap_pop(Trainer *t) {
    HeapEntry top = t->heap[0], last = t->heap[--t->heap_count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= t->heap_count)
            break;
        if (child + 1 < t->heap_count && heap_before(t->heap[child + 1], t->heap[child]))
            child++;
        if (!heap_before(t->heap[child], last))
            break;
        t->heap[i] = t->heap[child];
        i = child;
    }
    if (t->heap_count)
        t->heap[i] = last;
    return top;
}

/* The most frequent pair with an up-to-date heap entry, or -1 if none occurs often enough. */
static int32_t best_pair(Trainer *t) {
    while (t->heap_count) {
        HeapEntry top = heap_pop(t);
        int64_t now = t->pairs[top.pair].frequency;
        if (now == top.frequency)
            return now >= MIN_PAIR_FREQUENCY ? top.pair : -1;
        if (now < top.frequency && now > 0) /* it fell: back in at its current frequency */
            heap_push(t, top.pair);
        /* it rose: a newer entry is in the heap */
    }
    return -1;
}

/* Replace every (a, b) in word w (left to right, non-overlapping) by c, updating the
 * frequencies of the pairs that touch a merged position. */
static void merge_in_word(Trainer *t, uint32_t w, int32_t a, int32_t b, int32_t c) {
    Word *word = &t->words[w];
    int32_t *piece = t->pieces + word->first, merged[TOKENIZER_MAX_WORD_CHARS];
    unsigned char touched_old[TOKENIZER_MAX_WORD_CHARS], touched_new[TOKENIZER_MAX_WORD_CHARS];
    size_t n = word->length, m = 0;
    for (size_t i = 0; i < n;) {
        int hit = i + 1 < n && piece[i] == a && piece[i + 1] == b;
        touched_old[i] = (unsigned char)hit;
        if (hit)
            touched_old[i + 1] = 1;
        touched_new[m] = (unsigned char)hit;
        merged[m++] = hit ? c : piece[i];
        i += hit ? 2 : 1;
    }
    if (m == n)
        return; /* stale entry of the pair's word list */
    for (size_t i = 0; i + 1 < n; i++)
        if (touched_old[i] || touched_old[i + 1])
            pair_add(t, piece[i], piece[i + 1], -word->count, w);
    for (size_t i = 0; i + 1 < m; i++)
        if (touched_new[i] || touched_new[i + 1])
            pair_add(t, merged[i], merged[i + 1], word->count, w);
    memcpy(piece, merged, m * sizeof *merged);
    word->length = (uint32_t)m;
}

/* ---- counting ---- */
static int compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Count the basic-tokenizer words of every file into t->word_text / t->words. */
static int64_t count_words(Trainer *t, const char **paths, int path_count, int lower_case) {
    int64_t total = 0;
    char *line = NULL;
    size_t line_capacity = 0;
    BasicTokenizer basic;
    for (int p = 0; p < path_count; p++) {
        require_regular_file(paths[p], "corpus (--corpus)");
        FILE *f = fopen(paths[p], "rb");
        RP_CHECK(f, "vocab: cannot open corpus %s: %s", paths[p], strerror(errno));
        ssize_t got;
        while ((got = getline(&line, &line_capacity, f)) >= 0) {
            basic_init(&basic, line, (size_t)got, lower_case);
            while (basic_next_word(&basic)) {
                total++;
                if (basic.word_chars > TOKENIZER_MAX_WORD_CHARS)
                    continue;
                int added;
                int32_t i = strings_intern(&t->word_text, basic.word, basic.word_len, &added);
                if (added) {
                    t->words = grow(t->words, &t->word_capacity, (size_t)i + 1, sizeof *t->words);
                    t->words[i] = (Word){
                        .count = 0, .length = (uint32_t)basic.word_chars, .visited = UINT32_MAX};
                }
                t->words[i].count++;
            }
            basic_release(&basic);
        }
        RP_CHECK(!ferror(f), "vocab: cannot read corpus %s: %s", paths[p], strerror(errno));
        fclose(f);
    }
    free(line);
    return total;
}

/* Distinct code points of all words, sorted; returns their number. */
static size_t alphabet_of(const Trainer *t, uint32_t **alphabet) {
    size_t n = 0, capacity = 0;
    uint32_t *cps = NULL;
    for (size_t w = 0; w < t->word_text.count; w++) {
        const char *s = strings_get(&t->word_text, (int32_t)w);
        size_t len = strlen(s);
        for (size_t i = 0; i < len;) {
            cps = grow(cps, &capacity, n + 1, sizeof *cps);
            i += utf8_decode((const unsigned char *)s + i, len - i, &cps[n++]);
        }
    }
    if (n) /* an empty corpus has no characters (and cps is NULL) */
        qsort(cps, n, sizeof *cps, compare_u32);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++)
        if (!distinct || cps[i] != cps[distinct - 1])
            cps[distinct++] = cps[i];
    *alphabet = cps;
    return distinct;
}

/* Pieces of every word: its first character, then "##" + each following character. */
static void initial_pieces(Trainer *t, const uint32_t *alphabet, size_t alphabet_size) {
    for (int continuation = 0; continuation < 2; continuation++)
        for (size_t k = 0; k < alphabet_size; k++) {
            char text[8] = "##";
            size_t len = (size_t)continuation * 2;
            len += (size_t)utf8proc_encode_char((utf8proc_int32_t)alphabet[k],
                                                (utf8proc_uint8_t *)text + len);
            int added;
            strings_intern(&t->pieces_text, text, len, &added);
        }
    for (size_t w = 0; w < t->word_text.count; w++) {
        const char *s = strings_get(&t->word_text, (int32_t)w);
        size_t len = strlen(s);
        t->pieces = grow(t->pieces, &t->pieces_capacity, t->pieces_len + t->words[w].length,
                         sizeof *t->pieces);
        t->words[w].first = t->pieces_len;
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            i += utf8_decode((const unsigned char *)s + i, len - i, &cp);
            const uint32_t *at = bsearch(&cp, alphabet, alphabet_size, sizeof cp, compare_u32);
            size_t k = (size_t)(at - alphabet);
            t->pieces[t->pieces_len] =
                (int32_t)(t->pieces_len == t->words[w].first ? k : alphabet_size + k);
            t->pieces_len++;
        }
    }
}

char *vocab_train(const char **corpus_paths, int corpus_count, int size, int lower_case,
                  size_t *len, VocabTrainStats *stats) {
    Trainer t = {0};
    stats->words = count_words(&t, corpus_paths, corpus_count, lower_case);
    stats->distinct_words = (int64_t)t.word_text.count;
    RP_CHECK(t.word_text.count > 0, "vocab: --corpus %s%s: no words to learn a vocabulary from (empty or only "
             "whitespace and control characters)", corpus_paths[0], corpus_count > 1 ? " ..." : "");
    uint32_t *alphabet;
    size_t alphabet_size = alphabet_of(&t, &alphabet);
    RP_CHECK(SPECIAL_COUNT + 2 * alphabet_size <= (size_t)size,
             "vocab: --size %d cannot hold the %d special tokens and the %zu distinct characters "
             "of the corpus in both forms (c and ##c): %zu tokens at least",
             size, SPECIAL_COUNT, alphabet_size, SPECIAL_COUNT + 2 * alphabet_size);
    initial_pieces(&t, alphabet, alphabet_size);
    free(alphabet);

    t.step = 0;
    for (uint32_t w = 0; w < t.word_text.count; w++)
        for (uint32_t i = 0; i + 1 < t.words[w].length; i++)
            pair_add(&t, t.pieces[t.words[w].first + i], t.pieces[t.words[w].first + i + 1],
                     t.words[w].count, w);
    for (size_t p = 0; p < t.pair_count; p++)
        heap_push(&t, (int32_t)p);

    int merges = 0;
    while (SPECIAL_COUNT + t.pieces_text.count < (size_t)size) {
        int32_t best = best_pair(&t);
        if (best < 0)
            break;
        int32_t a = t.pairs[best].left, b = t.pairs[best].right;
        const char *left = strings_get(&t.pieces_text, a), *right = strings_get(&t.pieces_text, b);
        size_t left_len = strlen(left), right_len = strlen(right) - 2; /* right is "##..." */
        char *joined = xmalloc(left_len + right_len + 1);
        memcpy(joined, left, left_len);
        memcpy(joined + left_len, right + 2, right_len);
        int added;
        int32_t c = strings_intern(&t.pieces_text, joined, left_len + right_len, &added);
        free(joined);
        merges += added;

        t.step++;
        t.raised_count = 0;
        Pair *pair = &t.pairs[best];
        uint32_t *words = pair->words; /* detached: the merge may add to other pairs' lists */
        size_t word_count = pair->word_count;
        pair->words = NULL;
        pair->word_count = pair->word_capacity = 0;
        for (size_t i = 0; i < word_count; i++) {
            Word *word = &t.words[words[i]];
            if (word->visited == t.step)
                continue;
            word->visited = t.step;
            merge_in_word(&t, words[i], a, b, c);
        }
        free(words);
        for (size_t i = 0; i < t.raised_count; i++)
            heap_push(&t, t.raised[i]);
    }

    stats->special = SPECIAL_COUNT;
    stats->characters = (int)alphabet_size;
    stats->merges = merges;
    stats->tokens = SPECIAL_COUNT + (int)t.pieces_text.count;
    size_t text_len = 0;
    for (int i = 0; i < SPECIAL_COUNT; i++)
        text_len += strlen(special_tokens[i]) + 1;
    text_len += t.pieces_text.bytes_len; /* each piece + its NUL, which becomes the newline */
    char *text = xmalloc(text_len), *out = text;
    for (int i = 0; i < SPECIAL_COUNT; i++) {
        size_t n = strlen(special_tokens[i]);
        memcpy(out, special_tokens[i], n);
        out[n] = '\n';
        out += n + 1;
    }
    if (t.pieces_text.bytes_len) /* NULL when the corpus has no words */
        memcpy(out, t.pieces_text.bytes, t.pieces_text.bytes_len);
    for (size_t i = 0; i < t.pieces_text.bytes_len; i++)
        if (out[i] == '\0')
            out[i] = '\n';
    *len = text_len;

    for (size_t p = 0; p < t.pair_count; p++)
        free(t.pairs[p].words);
    free(t.pairs);
    free(t.pair_slots);
    free(t.heap);
    free(t.raised);
    free(t.words);
    free(t.pieces);
    strings_free(&t.word_text);
    strings_free(&t.pieces_text);
    return text;
}
