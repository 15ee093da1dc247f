/* `realpos tokenize`: WordPiece ids (or tokens) of each line of stdin.
 * `realpos vocab`: train a WordPiece vocabulary on corpus files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "train/cli/commands.h"
#include "train/data/tokenizer.h"
#include "train/data/vocab_train.h"


/* Write the decimal digits of a non-negative id at out; returns their number. */
static size_t format_id(char *out, int id) {
    char digits[12];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + id % 10);
        id /= 10;
    } while (id > 0);
    for (size_t i = 0; i < n; i++)
        out[i] = digits[n - 1 - i];
    return n;
}

int cmd_tokenize(int argc, char **argv) {
    const char *tokenize_usage = command_usage(argv[0]);
    const char *vocab_path = NULL;
    int lower_case = 1, print_tokens = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab")) {
            RP_CHECK(i + 1 < argc, "tokenize: --vocab expects a path\nusage: realpos %s", tokenize_usage);
            vocab_path = argv[++i];
        } else if (!strcmp(argv[i], "--cased")) {
            lower_case = 0;
        } else if (!strcmp(argv[i], "--tokens")) {
            print_tokens = 1;
        } else {
            RP_FATAL("tokenize: unexpected argument '%s'\nusage: realpos %s", argv[i], tokenize_usage);
        }
    }
    RP_CHECK(vocab_path, "tokenize: --vocab is required\nusage: realpos %s", tokenize_usage);
    require_regular_file(vocab_path, "tokenize: --vocab");
    Tokenizer *tok = tokenizer_load(vocab_path, lower_case);

    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    char *line = NULL, *text = NULL;
    size_t line_capacity = 0, ids_capacity = 0, text_capacity = 0;
    int *ids = NULL;
    ssize_t got;
    while ((got = getline(&line, &line_capacity, stdin)) >= 0) {
        size_t len = (size_t)got; /* the newline is whitespace to the tokenizer */
        if (len > ids_capacity) { /* at most one id per byte */
            ids_capacity = 2 * len;
            free(ids);
            ids = xmalloc(ids_capacity * sizeof *ids);
        }
        size_t n = tokenizer_encode(tok, line, len, ids, ids_capacity);
        RP_CHECK(n <= ids_capacity, "tokenize: more ids than input bytes (internal error)");
        if (print_tokens) {
            for (size_t i = 0; i < n; i++) {
                if (i)
                    fputc(' ', stdout);
                fputs(tokenizer_token(tok, ids[i]), stdout);
            }
            fputc('\n', stdout);
            continue;
        }
        size_t needed = 12 * n + 1; /* an id has at most 10 digits */
        if (needed > text_capacity) {
            text_capacity = 2 * needed;
            free(text);
            text = xmalloc(text_capacity);
        }
        size_t used = 0;
        for (size_t i = 0; i < n; i++) {
            if (i)
                text[used++] = ' ';
            used += format_id(text + used, ids[i]);
        }
        text[used++] = '\n';
        fwrite(text, 1, used, stdout);
    }
    RP_CHECK(!ferror(stdin), "tokenize: error reading stdin: %s", strerror(errno));
    RP_CHECK(fflush(stdout) == 0, "tokenize: error writing stdout: %s", strerror(errno));
    free(line);
    free(ids);
    free(text);
    tokenizer_free(tok);
    return 0;
}

int cmd_vocab(int argc, char **argv) {
    const char *vocab_usage = command_usage(argv[0]);
    const char *out_path = NULL;
    const char **corpus = xcalloc((size_t)argc, sizeof *corpus);
    int corpus_count = 0, lower_case = 1;
    int size = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--corpus")) {
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                corpus[corpus_count++] = argv[++i];
        } else if (!strcmp(argv[i], "--size")) {
            RP_CHECK(i + 1 < argc, "vocab: --size expects a number\nusage: realpos %s", vocab_usage);
            size = (int)cli_int("--size", argv[++i], 1, 1 << 24);
        } else if (!strcmp(argv[i], "--out")) {
            RP_CHECK(i + 1 < argc, "vocab: --out expects a path\nusage: realpos %s", vocab_usage);
            out_path = argv[++i];
        } else if (!strcmp(argv[i], "--cased")) {
            lower_case = 0;
        } else {
            RP_FATAL("vocab: unexpected argument '%s'\nusage: realpos %s", argv[i], vocab_usage);
        }
    }
    RP_CHECK(corpus_count > 0, "vocab: --corpus needs at least one file\nusage: realpos %s", vocab_usage);
    RP_CHECK(size > 0, "vocab: --size is required\nusage: realpos %s", vocab_usage);
    RP_CHECK(out_path, "vocab: --out is required\nusage: realpos %s", vocab_usage);
    IoPlan *plan = xmalloc(sizeof *plan);
    io_plan_init(plan);
    for (int i = 0; i < corpus_count; i++)
        io_plan_input(plan, corpus[i], "--corpus");
    io_plan_output(plan, out_path, "--out");
    io_plan_check(plan);
    free(plan);

    double start = now_seconds();
    VocabTrainStats stats;
    size_t len;
    char *vocab = vocab_train(corpus, corpus_count, size, lower_case, &len, &stats);
    write_file(out_path, vocab, len); /* whole or not at all: the previous vocabulary stays on a full disk */
    rp_log("vocab: %s: %d tokens (%d special, %d characters x2, %d merges) from %lld words "
           "(%lld distinct) in %.1f s",
           out_path, stats.tokens, stats.special, stats.characters, stats.merges,
           (long long)stats.words, (long long)stats.distinct_words, now_seconds() - start);
    if (stats.tokens < size)
        rp_log("vocab: stopped below --size %d: no pair of pieces occurs twice any more", size);
    free(vocab);
    free(corpus);
    return 0;
}
