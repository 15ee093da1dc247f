/* BasicTokenizer of tokenization.py (see basic_tokenizer.h for the steps). Unicode properties
 * come from libutf8proc; ASCII takes fast paths that give the same answers. */
#include "train/data/basic_tokenizer.h"

#include <string.h>
#include <utf8proc.h>

#include "core/common.h"

size_t utf8_decode(const unsigned char *text, size_t len, uint32_t *cp) {
    if (text[0] < 0x80) {
        *cp = text[0];
        return 1;
    }
    utf8proc_int32_t decoded;
    utf8proc_ssize_t used = utf8proc_iterate(text, (utf8proc_ssize_t)(len < 4 ? len : 4), &decoded);
    if (used <= 0) {
        *cp = 0xFFFD; /* invalid byte: replaced, then dropped by the cleaning step */
        return 1;
    }
    *cp = (uint32_t)decoded;
    return (size_t)used;
}

static utf8proc_category_t category(uint32_t cp) { return utf8proc_category((utf8proc_int32_t)cp); }

/* Steps 1-3: what cleaning and CJK splitting make of one input character. */
typedef enum { CHAR_DROPPED, CHAR_SPACE, CHAR_CJK, CHAR_WORD } CharClass;

/* _is_chinese_char: the CJK Unified Ideographs blocks and extensions, and the compatibility
 * ideographs (the ranges tokenization.py lists; Hangul, kana etc. are ordinary letters). */
static int is_cjk_ideograph(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static CharClass classify(uint32_t cp) {
    if (cp < 0x80) {
        if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r')
            return CHAR_SPACE;
        return cp < 0x20 || cp == 0x7F ? CHAR_DROPPED : CHAR_WORD; /* Cc, including U+0000 */
    }
    if (cp == 0xFFFD)
        return CHAR_DROPPED;
    utf8proc_category_t cat = category(cp);
    if (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF)
        return CHAR_DROPPED;
    if (cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP)
        return CHAR_SPACE;
    return is_cjk_ideograph(cp) ? CHAR_CJK : CHAR_WORD;
}

/* _is_punctuation: all non-alphanumeric printable ASCII, and every Unicode P* category. */
static int is_punctuation(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
    utf8proc_category_t cat = category(cp);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

static void chars_init(SourcedChars *chars) {
    chars->items = chars->inline_items;
    chars->count = 0;
    chars->capacity = BASIC_INLINE_CHARS;
}

static void chars_push(SourcedChars *chars, uint32_t cp, size_t start, size_t end) {
    if (chars->count == chars->capacity) {
        size_t capacity = 2 * chars->capacity;
        SourcedChar *items = xmalloc(capacity * sizeof *items);
        memcpy(items, chars->items, chars->count * sizeof *items);
        if (chars->items != chars->inline_items)
            free(chars->items);
        chars->items = items;
        chars->capacity = capacity;
    }
    chars->items[chars->count++] = (SourcedChar){cp, start, end};
}

static void chars_release(SourcedChars *chars) {
    if (chars->items != chars->inline_items)
        free(chars->items);
    chars_init(chars);
}

/* Steps 1-3: the next whitespace-separated token into basic->raw; 0 at the end of the text.
 * *ascii tells whether all its characters are ASCII. */
static int collect_token(BasicTokenizer *basic, int *ascii) {
    SourcedChars *raw = &basic->raw;
    raw->count = 0;
    *ascii = 1;
    while (basic->pos < basic->len) {
        size_t start = basic->pos;
        uint32_t cp;
        basic->pos += utf8_decode(basic->text + start, basic->len - start, &cp);
        switch (classify(cp)) {
        case CHAR_DROPPED:
            break;
        case CHAR_SPACE:
            if (raw->count)
                return 1;
            break;
        case CHAR_CJK:
            if (raw->count) { /* end the token here; the ideograph is read again next time */
                basic->pos = start;
                return 1;
            }
            chars_push(raw, cp, start, basic->pos);
            *ascii = 0;
            return 1;
        case CHAR_WORD:
            chars_push(raw, cp, start, basic->pos);
            *ascii &= cp < 0x80;
            break;
        }
    }
    return raw->count > 0;
}

/* Python's str.lower() maps U+03A3 (capital sigma) to final U+03C2 when it ends a word: a cased
 * letter precedes it and none follows, skipping case-ignorable characters both ways (Unicode
 * SpecialCasing Final_Sigma). libutf8proc has no Cased or Case_Ignorable property; they are
 * derived from the general category and the case mappings, plus the few characters that the
 * Unicode definitions add by other properties: Other_Lowercase/Other_Uppercase letters without a
 * case mapping are cased (the ordinal indicators, the squared and circled capitals) and the
 * Word_Break MidLetter/MidNumLet/Single_Quote characters are case-ignorable. (Checked against
 * Python 3.11 over every code point: no difference except for code points new in Unicode 15.) */
static int is_cased(uint32_t cp) {
    utf8proc_category_t cat = category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT || utf8proc_tolower((utf8proc_int32_t)cp) != (int32_t)cp ||
           utf8proc_toupper((utf8proc_int32_t)cp) != (int32_t)cp || cp == 0xAA || cp == 0xBA ||
           (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
           (cp >= 0x1F170 && cp <= 0x1F189);
}

static int is_case_ignorable(uint32_t cp) {
    static const uint32_t word_break_mid[] = {0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F,
                                              0x05F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                              0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    utf8proc_category_t cat = category(cp);
    if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
        cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK)
        return 1;
    for (size_t i = 0; i < sizeof word_break_mid / sizeof word_break_mid[0]; i++)
        if (cp == word_break_mid[i])
            return 1;
    return 0;
}

static uint32_t lower_capital_sigma(const SourcedChar *token, size_t count, size_t i) {
    size_t j = i;
    while (j > 0 && is_case_ignorable(token[j - 1].cp))
        j--;
    int final = j > 0 && is_cased(token[j - 1].cp);
    if (final) {
        j = i + 1;
        while (j < count && is_case_ignorable(token[j].cp))
            j++;
        final = j == count || !is_cased(token[j].cp);
    }
    return final ? 0x3C2 : 0x3C3;
}

static int combining_class(uint32_t cp) {
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
}

/* Step 4 for a token with non-ASCII characters: lower-case, NFD (canonical decomposition, then
 * canonical ordering: a stable sort of each run of non-starters by combining class), and drop
 * Mn marks, whose source bytes join the character before them. raw -> norm. */
static void lower_and_strip_accents(BasicTokenizer *basic) {
    const SourcedChars *raw = &basic->raw;
    SourcedChars *norm = &basic->norm;
    norm->count = 0;
    for (size_t i = 0; i < raw->count; i++) {
        const SourcedChar *c = &raw->items[i];
        uint32_t lower = c->cp == 0x3A3 ? lower_capital_sigma(raw->items, raw->count, i)
                                        : (uint32_t)utf8proc_tolower((utf8proc_int32_t)c->cp);
        utf8proc_int32_t decomposed[16]; /* canonical decompositions have at most 4 */
        int boundclass = 0;
        utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)lower, decomposed, 16,
                                                     UTF8PROC_DECOMPOSE, &boundclass);
        if (n <= 0 || n > 16) { /* cannot happen for a valid code point; keep it as it is */
            decomposed[0] = (utf8proc_int32_t)lower;
            n = 1;
        }
        for (utf8proc_ssize_t k = 0; k < n; k++)
            chars_push(norm, (uint32_t)decomposed[k], c->start, c->end);
    }
    SourcedChar *items = norm->items;
    for (size_t i = 1; i < norm->count; i++) {
        int ccc = combining_class(items[i].cp);
        for (size_t j = i; ccc != 0 && j > 0 && combining_class(items[j - 1].cp) > ccc; j--) {
            SourcedChar swap = items[j];
            items[j] = items[j - 1];
            items[j - 1] = swap;
        }
    }
    /* A dropped mark's bytes join the kept character before it in the source, which canonical
     * ordering (within a run of non-starters) may have moved after it: search the mark's run,
     * else the nearest kept character before the run. */
    for (size_t i = 0; i < norm->count; i++) {
        if (category(items[i].cp) != UTF8PROC_CATEGORY_MN)
            continue;
        size_t lo = i, hi = i;
        while (lo > 0 && combining_class(items[lo].cp) != 0)
            lo--;
        while (hi + 1 < norm->count && combining_class(items[hi + 1].cp) != 0)
            hi++;
        SourcedChar *owner = NULL;
        for (size_t j = lo; j <= hi; j++)
            if (category(items[j].cp) != UTF8PROC_CATEGORY_MN && items[j].start <= items[i].start &&
                (!owner || items[j].start > owner->start))
                owner = &items[j];
        for (size_t j = lo; !owner && j-- > 0;)
            if (category(items[j].cp) != UTF8PROC_CATEGORY_MN)
                owner = &items[j];
        if (owner && items[i].end > owner->end)
            owner->end = items[i].end;
    }
    size_t kept = 0;
    for (size_t i = 0; i < norm->count; i++)
        if (category(items[i].cp) != UTF8PROC_CATEGORY_MN)
            items[kept++] = items[i];
    norm->count = kept;
}

/* Next token with steps 1-4 applied (possibly empty after step 4); 0 at the end of the text. */
static int load_token(BasicTokenizer *basic) {
    int ascii;
    if (!collect_token(basic, &ascii))
        return 0;
    basic->next = 0;
    basic->token = &basic->raw;
    if (basic->lower_case) {
        if (ascii) { /* ASCII: lower-casing is A-Z -> a-z, NFD is the identity, no Mn */
            for (size_t i = 0; i < basic->raw.count; i++)
                if (basic->raw.items[i].cp - 'A' < 26u)
                    basic->raw.items[i].cp += 'a' - 'A';
        } else {
            lower_and_strip_accents(basic);
            basic->token = &basic->norm;
        }
    }
    return 1;
}

void basic_init(BasicTokenizer *basic, const char *text, size_t len, int lower_case) {
    basic->text = (const unsigned char *)text;
    basic->len = len;
    basic->pos = 0;
    basic->lower_case = lower_case;
    chars_init(&basic->raw);
    chars_init(&basic->norm);
    basic->token = &basic->raw;
    basic->next = 0;
    basic->word = basic->inline_word;
    basic->word_capacity = sizeof basic->inline_word;
    basic->word_len = basic->word_chars = basic->word_start = basic->word_end = 0;
    basic->word[0] = '\0';
}

/* Store characters [first, last) of the current token as the current word. */
static void set_word(BasicTokenizer *basic, size_t first, size_t last) {
    size_t needed = 4 * (last - first) + 1;
    if (needed > basic->word_capacity) {
        if (basic->word != basic->inline_word)
            free(basic->word);
        basic->word_capacity = 2 * needed;
        basic->word = xmalloc(basic->word_capacity);
    }
    const SourcedChar *items = basic->token->items;
    size_t len = 0, start = items[first].start, end = items[first].end;
    for (size_t i = first; i < last; i++) {
        uint32_t cp = items[i].cp;
        if (cp < 0x80)
            basic->word[len++] = (char)cp;
        else
            len += (size_t)utf8proc_encode_char((utf8proc_int32_t)cp,
                                                (utf8proc_uint8_t *)basic->word + len);
        if (items[i].start < start) /* canonical ordering may permute marks */
            start = items[i].start;
        if (items[i].end > end)
            end = items[i].end;
    }
    basic->word[len] = '\0';
    basic->word_len = len;
    basic->word_chars = last - first;
    basic->word_start = start;
    basic->word_end = end;
}

int basic_next_word(BasicTokenizer *basic) {
    while (basic->next >= basic->token->count)
        if (!load_token(basic))
            return 0;
    const SourcedChar *items = basic->token->items;
    size_t first = basic->next, last = first + 1;
    if (!is_punctuation(items[first].cp))
        while (last < basic->token->count && !is_punctuation(items[last].cp))
            last++;
    set_word(basic, first, last);
    basic->next = last;
    return 1;
}

void basic_release(BasicTokenizer *basic) {
    chars_release(&basic->raw);
    chars_release(&basic->norm);
    if (basic->word != basic->inline_word)
        free(basic->word);
    basic->word = basic->inline_word;
    basic->word_capacity = sizeof basic->inline_word;
}
