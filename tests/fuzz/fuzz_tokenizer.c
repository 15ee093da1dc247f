/* Fuzz target: the tokenizer (train/data/tokenizer.c, basic_tokenizer.c): basic tokenization and
 * WordPiece of arbitrary bytes, lower-cased and cased, on the fixture vocabulary; and, when the
 * input starts with "[PAD]", the input itself as a vocabulary (loaded or rejected with an error
 * exit). Checked: ids in range and at most one per input byte, word spans inside the text, in
 * order and non-empty, and each word's WordPiece within the text's. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "tests/fuzz/fuzz.h"
#include "train/data/tokenizer.h"

static void check_text(const Tokenizer *tok, const char *text, size_t len) {
    int vocab_size = tokenizer_vocab_size(tok);
    int *ids = xmalloc((len + 1) * sizeof *ids);
    size_t n = tokenizer_encode(tok, text, len, ids, len + 1);
    FUZZ_REQUIRE(n <= len, "more ids than input bytes");
    for (size_t i = 0; i < n; i++)
        FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < vocab_size, "id out of range");
    WordSpan *words = xmalloc((len + 1) * sizeof *words);
    size_t num_words = tokenizer_basic_words(tok, text, len, words, len + 1);
    FUZZ_REQUIRE(num_words <= len, "more words than input bytes");
    int *piece = xmalloc((len + 1) * sizeof *piece);
    for (size_t w = 0; w < num_words; w++) {
        FUZZ_REQUIRE(words[w].start < words[w].end && words[w].end <= len, "word span empty or outside the text");
        FUZZ_REQUIRE(!w || words[w].start >= words[w - 1].end, "word spans overlap or go backwards");
        size_t span = words[w].end - words[w].start;
        size_t m = tokenizer_wordpiece(tok, text + words[w].start, span, piece, len + 1);
        FUZZ_REQUIRE(m >= 1 && m <= span, "a word's WordPiece count is outside [1, its bytes]");
        for (size_t i = 0; i < m; i++)
            FUZZ_REQUIRE(piece[i] >= 0 && piece[i] < vocab_size, "WordPiece id out of range");
    }
    FUZZ_REQUIRE(num_words <= n, "fewer ids than words (each word gives at least one)");
    free(piece);
    free(words);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    static Tokenizer *fixed[2];
    if (!fixed[0]) {
        const char *path = getenv("FUZZ_VOCAB");
        for (int lower = 0; lower < 2; lower++)
            fixed[lower] = tokenizer_load(path ? path : "tests/fixtures/tokenizer/vocab.txt", lower);
    }
    const char *text = (const char *)data;
    static const char vocab_prefix[] = "[PAD]";
    for (volatile int lower = 0; lower < 2; lower++) {
        fuzz_begin();
        if (setjmp(fuzz_jump) == 0) {
            check_text(fixed[lower], text, size);
            if (size >= sizeof vocab_prefix - 1 && !memcmp(data, vocab_prefix, sizeof vocab_prefix - 1)) {
                Tokenizer *own = tokenizer_from_text(text, size, lower, "fuzz vocabulary");
                check_text(own, text, size);
                tokenizer_free(own);
            }
            fuzz_end();
        } else {
            fuzz_recover();
        }
    }
    return 0;
}
