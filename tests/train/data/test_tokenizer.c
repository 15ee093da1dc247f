/* Tokenizer and vocabulary trainer tests on the fixture vocabulary
 * tests/fixtures/tokenizer/vocab.txt (special tokens deliberately not at BERT's ids). Expected
 * outputs are written by hand from the rules of google-research/bert tokenization.py; the
 * command-line tests and the checks against the real bert-base-uncased vocabulary are in
 * tests/train/data/test_tokenizer.sh. Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "train/data/tokenizer.h"
#include "train/data/vocab_train.h"
#include "tests/check.h"

#define FIXTURES "tests/fixtures/tokenizer/"

/* The pieces of text as "piece piece ...". */
static const char *pieces_of(const Tokenizer *tok, const char *text, size_t len) {
    static char out[8192];
    int ids[512];
    size_t n = tokenizer_encode(tok, text, len, ids, 512), used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < 512; i++) {
        const char *piece = tokenizer_token(tok, ids[i]);
        if (used + strlen(piece) + 2 > sizeof out)
            break;
        used += (size_t)sprintf(out + used, "%s%s", i ? " " : "", piece);
    }
    return out;
}

/* String literals may hold NUL bytes: their length comes from sizeof. */
#define CHECK_PIECES(tally, tok, literal, expected, what)                                          \
    do {                                                                                           \
        const char *got_ = pieces_of(tok, literal, sizeof(literal) - 1);                           \
        CHECK(tally, !strcmp(got_, expected), "%s: '%s' (expected '%s')", what, got_, expected);   \
    } while (0)

static void test_vocabulary(TestTally *t, const Tokenizer *uncased) {
    SpecialTokens s = tokenizer_special(uncased);
    CHECK(t, s.pad == 0 && s.unk == 9 && s.cls == 3 && s.sep == 4 && s.mask == 5,
          "special ids looked up by name: pad %d unk %d cls %d sep %d mask %d", s.pad, s.unk, s.cls,
          s.sep, s.mask);
    CHECK(t, tokenizer_vocab_size(uncased) == 30, "vocab size %d", tokenizer_vocab_size(uncased));
    CHECK(t,
          tokenizer_lookup(uncased, "##aff") == 11 && tokenizer_lookup(uncased, "aff") == -1 &&
              tokenizer_lookup(uncased, "οδος") == 23,
          "lookup of exact token strings");
    CHECK(t,
          !strcmp(tokenizer_token(uncased, 12), "##able") &&
              tokenizer_is_continuation(uncased, 12) && !tokenizer_is_continuation(uncased, 10),
          "token strings and ## continuations");

    /* CRLF line ends, spaces around a token, no newline at the end (a repeated token or an
     * empty line is an error: tests/train/cli/test_hostile.sh) */
    const char text[] = "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nx\r\n  y \t\r\nlast";
    Tokenizer *tok = tokenizer_from_text(text, sizeof text - 1, 1, "inline vocab");
    CHECK(t,
          tokenizer_vocab_size(tok) == 8 && tokenizer_lookup(tok, "y") == 6 &&
              !strcmp(tokenizer_token(tok, 5), "x") && tokenizer_lookup(tok, "last") == 7,
          "vocab text: CRLF and spaces stripped, last line without newline");
    tokenizer_free(tok);
}

static void test_basic(TestTally *t, const Tokenizer *uncased, const Tokenizer *cased) {
    CHECK_PIECES(t, uncased, "hello world", "hello world", "two words");
    CHECK_PIECES(t, uncased, "Héllo HÉLLO", "hello hello", "uncased: lower-cased, accent stripped");
    CHECK_PIECES(t, uncased, "He\xCC\x81llo", "hello", "uncased: decomposed accent stripped");
    CHECK_PIECES(t, uncased, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz",
                 "uncased: A-Z lower-cased");
    /* x + U+1D16D (Mc, combining class 226) + U+1D165 (Mc, 216): NFD puts 216 first */
    CHECK_PIECES(t, uncased, "X\xF0\x9D\x85\xAD\xF0\x9D\x85\xA5",
                 "x\xF0\x9D\x85\xA5\xF0\x9D\x85\xAD",
                 "uncased: NFD orders combining marks by combining class");
    CHECK_PIECES(t, cased, "x\xF0\x9D\x85\xAD\xF0\x9D\x85\xA5", "[UNK]", "cased: no reordering");
    CHECK_PIECES(t, cased, "Héllo", "Héllo", "cased: accent kept");
    CHECK_PIECES(t, cased, "hello He\xCC\x81llo", "hello [UNK]", "cased: no normalisation");
    CHECK_PIECES(t, uncased, "don't", "don ' t", "punctuation split");
    CHECK_PIECES(t, uncased, "hello,world.", "hello , world .", "punctuation inside a token");
    CHECK_PIECES(t, uncased, "[CLS]", "[ cl ##s ]", "[CLS] in text is not special");
    CHECK_PIECES(t, uncased, "中文", "中 文", "CJK: one word per ideograph");
    CHECK_PIECES(t, uncased, "hello中文world", "hello 中 文 world", "CJK inside a token");
    CHECK_PIECES(t, uncased, "中文字", "中 文 [UNK]", "CJK: an unknown ideograph alone is [UNK]");
    CHECK_PIECES(t, uncased, "ΟΔΟΣ. ΟΔΟΣ", "οδος . οδος",
                 "capital sigma ending a word -> final sigma");
    CHECK_PIECES(t, uncased, "hel\x01lo hel\0lo \xEF\xBB\xBFhello hel\xE2\x80\x8Blo wor\x7Fld",
                 "hello hello hello hello world", "control/format chars dropped without a split");
    CHECK_PIECES(t, uncased, "hello\vworld", "[UNK]", "\\v is a control char, not whitespace");
    CHECK_PIECES(t, uncased, "hello\tworld\nhello\r\nworld  hello", "hello world hello world hello",
                 "tabs, newlines, CR as whitespace");
    CHECK_PIECES(t, uncased, "hello\xC2\xA0world\xE3\x80\x80hello\xE2\x80\xA8world",
                 "hello world hello world",
                 "NBSP, ideographic space, line separator as whitespace");
    CHECK_PIECES(t, uncased, "", "", "empty text");
    CHECK_PIECES(t, uncased, " \t\r\n\xC2\xA0 ", "", "whitespace only");
    CHECK_PIECES(
        t, uncased,
        "hel\xFFlo hello\xC3 \xED\xA0\x80hello \xC0\xAFhello \xF4\x90\x80\x80hello \x80hello",
        "hello hello hello hello hello hello",
        "invalid UTF-8 (bad byte, truncated, surrogate, overlong, >U+10FFFF, stray) dropped");
}

static void test_wordpiece(TestTally *t, const Tokenizer *uncased, const Tokenizer *cased) {
    CHECK_PIECES(t, uncased, "unaffable", "un ##aff ##able", "## continuations");
    CHECK_PIECES(t, uncased, "xyz", "[UNK]", "no match");
    CHECK_PIECES(t, uncased, "unxyz", "[UNK]", "partial match is one [UNK] for the whole word");
    CHECK_PIECES(t, uncased, "hello xyz world", "hello [UNK] world", "[UNK] only for the bad word");

    char text[2 * (TOKENIZER_MAX_WORD_CHARS + 1) + 1];
    int ids[TOKENIZER_MAX_WORD_CHARS + 1];
    memset(text, 'a', TOKENIZER_MAX_WORD_CHARS + 1);
    size_t n = tokenizer_encode(uncased, text, TOKENIZER_MAX_WORD_CHARS, ids,
                                TOKENIZER_MAX_WORD_CHARS + 1);
    CHECK(t, n == TOKENIZER_MAX_WORD_CHARS && ids[0] == 18 && ids[n - 1] == 19,
          "word of %d chars: a ##a ... (%zu ids)", TOKENIZER_MAX_WORD_CHARS, n);
    n = tokenizer_encode(uncased, text, TOKENIZER_MAX_WORD_CHARS + 1, ids,
                         TOKENIZER_MAX_WORD_CHARS + 1);
    CHECK(t, n == 1 && ids[0] == 9, "word of %d chars: [UNK] (%zu ids)",
          TOKENIZER_MAX_WORD_CHARS + 1, n);
    for (int i = 0; i <= TOKENIZER_MAX_WORD_CHARS; i++)
        memcpy(text + 2 * i, "\xC3\xA9", 2); /* é: two bytes, one character */
    n = tokenizer_encode(cased, text, 2 * TOKENIZER_MAX_WORD_CHARS, ids,
                         TOKENIZER_MAX_WORD_CHARS + 1);
    CHECK(t, n == TOKENIZER_MAX_WORD_CHARS && ids[0] == 20 && ids[1] == 21,
          "length limit counts characters, not bytes: %d x é -> %zu ids", TOKENIZER_MAX_WORD_CHARS,
          n);
    n = tokenizer_encode(cased, text, 2 * (TOKENIZER_MAX_WORD_CHARS + 1), ids,
                         TOKENIZER_MAX_WORD_CHARS + 1);
    CHECK(t, n == 1 && ids[0] == 9, "%d x é -> [UNK]", TOKENIZER_MAX_WORD_CHARS + 1);

    /* one whitespace token of 3000 characters (beyond the inline buffers), 1000 words */
    size_t long_len = 0;
    char long_token[4000];
    for (int i = 0; i < 500; i++)
        long_len += (size_t)sprintf(long_token + long_len, "H\xC3\xA9llo,");
    int long_ids[1001];
    n = tokenizer_encode(uncased, long_token, long_len, long_ids, 1001);
    int alternating = n == 1000;
    for (size_t i = 0; alternating && i < n; i++)
        alternating = long_ids[i] == (i % 2 ? 13 : 1);
    CHECK(t, alternating, "3000-character token \"Héllo,Héllo,...\" -> hello , x 500 (%zu ids)", n);

    int few[3] = {-7, -7, -7};
    n = tokenizer_encode(uncased, "hello world hello", 17, few, 2);
    CHECK(t, n == 3 && few[0] == 1 && few[1] == 2 && few[2] == -7,
          "capacity: returns the full count (%zu), writes only `capacity` ids", n);
}

static void test_spans(TestTally *t, const Tokenizer *uncased, const Tokenizer *cased) {
    const char text[] = "Don't  stop, héllo";
    WordSpan w[8];
    size_t n = tokenizer_basic_words(uncased, text, sizeof text - 1, w, 8);
    const size_t want[][2] = {{0, 3}, {3, 4}, {4, 5}, {7, 11}, {11, 12}, {13, 19}};
    int ok = n == 6;
    for (size_t i = 0; ok && i < n; i++)
        ok = w[i].start == want[i][0] && w[i].end == want[i][1];
    CHECK(t, ok, "word spans of \"%s\" (%zu words)", text, n);

    const char marks[] = "\xCC\x81"
                         "ab\x01"
                         "c\xCC\x81 a\xE4\xB8\xAD"
                         "b";
    n = tokenizer_basic_words(uncased, marks, sizeof marks - 1, w, 8);
    CHECK(t,
          n == 4 && w[0].start == 2 && w[0].end == 8 && w[1].start == 9 && w[1].end == 10 &&
              w[2].start == 10 && w[2].end == 13 && w[3].start == 13 && w[3].end == 14,
          "spans: leading mark dropped, inner control and trailing stripped mark kept, CJK alone");
    n = tokenizer_basic_words(cased, marks, sizeof marks - 1, w, 1);
    CHECK(t, n == 4 && w[0].start == 0 && w[0].end == 8,
          "spans, cased: marks stay in the word; capacity 1 still counts all %zu words", n);

    /* SQuAD use: the WordPiece of each span, concatenated, is the encoding of the text */
    const char sentence[] = "Héllo, don't stop unaffable 中文! ΟΔΟΣ";
    int all[64], part[64], joined[64];
    size_t total = tokenizer_encode(uncased, sentence, sizeof sentence - 1, all, 64), used = 0;
    WordSpan spans[16];
    n = tokenizer_basic_words(uncased, sentence, sizeof sentence - 1, spans, 16);
    for (size_t i = 0; i < n && i < 16; i++) {
        size_t k = tokenizer_wordpiece(uncased, sentence + spans[i].start,
                                       spans[i].end - spans[i].start, part, 64);
        for (size_t j = 0; j < k && used < 64; j++)
            joined[used++] = part[j];
    }
    CHECK(t, n == 11 && used == total && !memcmp(all, joined, total * sizeof *all),
          "WordPiece of each span == encoding of the text (%zu words, %zu ids)", n, total);
}

/* A small file's bytes (fatal if missing or over 64 KiB). */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    RP_CHECK(f, "cannot open fixture %s (run from the repository root)", path);
    char *text = xmalloc(1 << 16);
    *len = fread(text, 1, 1 << 16, f);
    RP_CHECK(*len < (1 << 16) && !ferror(f), "fixture %s: unreadable or too large", path);
    fclose(f);
    return text;
}

static void test_training(TestTally *t) {
    /* hug x10, pug x5, pun x12, bun x4, hugs x5. Pair frequencies: ##u ##g 20 -> ##ug; then
     * ##u ##n 16 -> ##un; h ##ug 15 -> hug; p ##un 12 -> pun; p ##ug 5 ties hug ##s 5, p has the
     * smaller id -> pug; hug ##s -> hugs; b ##un 4 -> bun; then every word is one piece. */
    const char *expected = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nb\ng\nh\nn\np\ns\nu\n##b\n##g\n##"
                           "h\n##n\n##p\n##s\n##u\n"
                           "##ug\n##un\nhug\npun\npug\nhugs\nbun\n";
    const char *paths[] = {FIXTURES "corpus_hug.txt"};
    VocabTrainStats stats;
    size_t len;
    char *vocab = vocab_train(paths, 1, 100, 1, &len, &stats);
    CHECK(t,
          len == strlen(expected) && !memcmp(vocab, expected, len) && stats.tokens == 26 &&
              stats.merges == 7 && stats.words == 36 && stats.distinct_words == 5,
          "training on the hug corpus gives the hand-derived vocabulary (%d tokens, %d merges)",
          stats.tokens, stats.merges);
    free(vocab);
    vocab = vocab_train(paths, 1, 22, 1, &len, &stats);
    size_t prefix = (size_t)(strstr(expected, "pun\n") - expected);
    CHECK(t, len == prefix && !memcmp(vocab, expected, len) && stats.tokens == 22,
          "--size 22 stops after the first 3 merges");
    free(vocab);

    const char *corpus[] = {FIXTURES "corpus.txt"};
    for (int lower_case = 1; lower_case >= 0; lower_case--) {
        vocab = vocab_train(corpus, 1, 300, lower_case, &len, &stats);
        Tokenizer *tok = tokenizer_from_text(vocab, len, lower_case, "trained vocab");
        SpecialTokens s = tokenizer_special(tok);
        size_t text_len, unknown = 0;
        char *text = slurp(corpus[0], &text_len);
        int ids[1024];
        size_t n = tokenizer_encode(tok, text, text_len, ids, 1024);
        for (size_t i = 0; i < n && i < 1024; i++)
            unknown += ids[i] == s.unk;
        CHECK(t,
              s.pad == 0 && s.unk == 1 && s.cls == 2 && s.sep == 3 && s.mask == 4 &&
                  tokenizer_vocab_size(tok) == stats.tokens && stats.tokens < 300,
              "trained vocab (%s): special tokens at 0-4, %d tokens (the small corpus runs out "
              "of pairs seen twice before --size 300)",
              lower_case ? "uncased" : "cased", tokenizer_vocab_size(tok));
        CHECK(t, n <= 1024 && unknown == 0, "trained vocab (%s): corpus -> %zu ids, %zu [UNK]",
              lower_case ? "uncased" : "cased", n, unknown);
        int both_forms = tokenizer_lookup(tok, "中") >= 0 && tokenizer_lookup(tok, "##中") >= 0 &&
                         tokenizer_lookup(tok, "\"") >= 0 && tokenizer_lookup(tok, "##\"") >= 0;
        int accented = tokenizer_lookup(tok, "é") >= 0 && tokenizer_lookup(tok, "##é") >= 0;
        CHECK(t, both_forms && accented == !lower_case,
              "trained vocab (%s): characters in both forms, é %s",
              lower_case ? "uncased" : "cased", lower_case ? "stripped to e" : "kept");
        free(text);
        tokenizer_free(tok);
        free(vocab);
    }
}

/* The real vocabulary, if scripts/get_vocab.sh has fetched it: BERT's special ids. */
static void test_bert_vocab(TestTally *t) {
    const char *path = "data/vocab/bert-base-uncased.txt";
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP bert-base-uncased special ids: %s not found (run scripts/get_vocab.sh)\n",
               path);
        return;
    }
    fclose(f);
    Tokenizer *tok = tokenizer_load(path, 1);
    SpecialTokens s = tokenizer_special(tok);
    CHECK(t,
          tokenizer_vocab_size(tok) == 30522 && s.pad == 0 && s.unk == 100 && s.cls == 101 &&
              s.sep == 102 && s.mask == 103,
          "bert-base-uncased: 30522 tokens, [PAD] 0 [UNK] 100 [CLS] 101 [SEP] 102 [MASK] 103");
    tokenizer_free(tok);
}

int main(void) {
    TestTally t = {0, 0};
    Tokenizer *uncased = tokenizer_load(FIXTURES "vocab.txt", 1);
    Tokenizer *cased = tokenizer_load(FIXTURES "vocab.txt", 0);
    test_vocabulary(&t, uncased);
    test_basic(&t, uncased, cased);
    test_wordpiece(&t, uncased, cased);
    test_spans(&t, uncased, cased);
    test_training(&t);
    test_bert_vocab(&t);
    tokenizer_free(uncased);
    tokenizer_free(cased);
    return tally_exit(&t);
}
