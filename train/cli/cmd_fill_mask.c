/* realpos fill-mask: the MLM head's top-k tokens for every [MASK] of lines of text, like
 * HuggingFace's fill-mask pipeline: quick evidence that a (freshly imported) model is sane.
 *
 * Each line is split at the literal "[MASK]" (as HF's tokenizer keeps special tokens whole), the
 * pieces tokenized, and [CLS] pieces/[MASK] ids [SEP] run through the model in eval mode
 * (token type 0, no padding: each line is a batch [1, its length], in activations laid out once
 * for the longest line). Per mask: softmax over the vocabulary, the top-k tokens with their
 * probabilities. A line alone has no padding to lay out, so the checkpoint's data.padding and
 * task.padding do not apply (the output does not depend on them: tests/train/model/test_fill_mask_lines.sh). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "layers/layers.h"
#include "train/cli/commands.h"
#include "train/model/checkpoint.h"
#include "train/tasks/loaded_model.h"

#define MASK_TEXT "[MASK]"

/* [CLS] tokens [SEP] of one line into ids (capacity >= strlen(line) + 2 + masks); returns the
 * length, counting masks in *num_masks. */
static int encode_line(const Tokenizer *tok, const char *line, int *ids, int *num_masks) {
    SpecialTokens sp = tokenizer_special(tok);
    int n = 0;
    *num_masks = 0;
    ids[n++] = sp.cls;
    for (const char *at = line;;) {
        const char *mask = strstr(at, MASK_TEXT);
        size_t len = mask ? (size_t)(mask - at) : strlen(at);
        n += (int)tokenizer_encode(tok, at, len, ids + n, len + 1);
        if (!mask)
            break;
        ids[n++] = sp.mask;
        (*num_masks)++;
        at = mask + strlen(MASK_TEXT);
    }
    ids[n++] = sp.sep;
    return n;
}

static void print_top_k(const Tokenizer *tok, const float *logits, int V, int top_k, float *probs) {
    float max = logits[0];
    for (int v = 1; v < V; v++)
        max = logits[v] > max ? logits[v] : max;
    double sum = 0;
    for (int v = 0; v < V; v++)
        sum += probs[v] = expf(logits[v] - max);
    for (int rank = 1; rank <= top_k; rank++) {
        int best = -1;
        for (int v = 0; v < V; v++)
            if (probs[v] >= 0 && (best < 0 || probs[v] > probs[best]))
                best = v;
        printf("    %2d  %-20s %.4f\n", rank, tokenizer_token(tok, best), probs[best] / sum);
        probs[best] = -1; /* taken */
    }
}

/* The model, and batch buffers and activations laid out once for the longest line: each line is
 * a batch [1, its length] in a prefix of them. */
typedef struct {
    const LoadedModel *lm;
    Activations acts;
    int *ids, *types, *attn, *labels; /* [longest] */
    float *logits, *probs;            /* [most masks, V], [V] */
} FillMask;

static void fill_line(FillMask *fm, const char *line, int line_number, int top_k) {
    const ModelConfig *c = &fm->lm->cfg.model;
    int masks, L = encode_line(fm->lm->tok, line, fm->ids, &masks);
    RP_CHECK(masks > 0, "line %d: no %s in '%s'", line_number, MASK_TEXT, line);
    RP_CHECK(!c->absolute_position || L <= c->max_position,
             "line %d: %d tokens exceed the model's max_position = %d", line_number, L, c->max_position);
    int mask_id = tokenizer_special(fm->lm->tok).mask;
    for (int l = 0; l < L; l++) {
        fm->types[l] = 0;
        fm->attn[l] = 1;
        fm->labels[l] = fm->ids[l] == mask_id ? mask_id : IGNORE_LABEL; /* labelled = the positions whose logits we want */
    }
    Batch batch = {1, L, fm->ids, fm->types, fm->attn, fm->labels, NULL};
    model_mlm_forward(&fm->lm->model, &fm->acts, &batch, FORWARD_EVAL, 0, fm->logits);
    printf("%s\n", line);
    for (int k = 0; k < masks; k++) {
        printf("  %s %d of %d\n", MASK_TEXT, k + 1, masks);
        print_top_k(fm->lm->tok, fm->logits + (size_t)k * c->vocab_size, c->vocab_size, top_k, fm->probs);
    }
    fflush(stdout);
}

/* Calls visit(line, line_number, ctx) for each non-blank line of input (modified in place:
 * newlines become NULs); returns how many. */
static int for_each_line(char *input, void (*visit)(const char *, int, void *), void *ctx) {
    int line_number = 0, visited = 0;
    for (char *line = input; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        line_number++;
        if (strspn(line, " \t\r") < strlen(line)) {
            visit(line, line_number, ctx);
            visited++;
        }
        if (!end)
            break;
        line = end + 1;
    }
    return visited;
}

typedef struct {
    const Tokenizer *tok;
    int *ids;
    size_t capacity; /* of ids: the longest line's strlen + 2 so far */
    int longest, most_masks;
} LineSizes;

static void measure_line(const char *line, int line_number, void *ctx) {
    (void)line_number;
    LineSizes *sz = ctx;
    size_t cap = strlen(line) + 2;
    if (cap > sz->capacity) {
        free(sz->ids);
        sz->ids = xmalloc(sizeof(int) * cap);
        sz->capacity = cap;
    }
    int masks, L = encode_line(sz->tok, line, sz->ids, &masks);
    sz->longest = L > sz->longest ? L : sz->longest;
    sz->most_masks = masks > sz->most_masks ? masks : sz->most_masks;
}

typedef struct {
    FillMask *fm;
    int top_k;
} FillLines;

static void fill_visit(const char *line, int line_number, void *ctx) {
    FillLines *fl = ctx;
    fill_line(fl->fm, line, line_number, fl->top_k);
}

int cmd_fill_mask(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *top_text = "5", *text = NULL, *vocab_path = NULL, *precision_text = NULL;
    CliOption options[] = {{"top-k", &top_text}, {"text", &text}, {"vocab", &vocab_path}, {"precision", &precision_text}};
    CliArgs a = cli_parse(argc, argv, options, 4);
    RP_CHECK(a.num_positional == 1 && !a.num_sets, "usage: realpos %s", usage);
    const Precision precision = cli_precision(precision_text);
    char ckpt[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest */
    checkpoint_resolve(a.positional[0], NULL, ckpt, sizeof ckpt);
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, ckpt, "the checkpoint");
    if (vocab_path)
        io_plan_input(&plan, vocab_path, "--vocab");
    io_plan_check(&plan);
    LoadedModel lm;
    load_model_with_vocab(&lm, ckpt, vocab_path);
    RP_CHECK(lm.model.heads.mlm, "%s: no MLM head (cls/predictions); fill-mask needs a pretrained (not fine-tuned) "
             "checkpoint", ckpt);
    int top_k = (int)cli_int("--top-k", top_text, 1, lm.cfg.model.vocab_size);
    size_t input_len = 0;
    char *input = text ? xstrdup(text) : read_stream(stdin, "standard input", &input_len, "text");
    const char *nul = text ? NULL : memchr(input, '\0', input_len);
    if (nul) { /* C strings end there: the rest of the input would be dropped silently */
        int line = 1;
        for (const char *c = input; c < nul; c++)
            line += *c == '\n';
        RP_FATAL("standard input: a NUL byte at byte %zu (line %d): expected text", (size_t)(nul - input), line);
    }
    /* first pass: the longest line and the most masks, for one layout of every buffer */
    char *sizing = xstrdup(input);
    LineSizes sz = {lm.tok, NULL, 0, 0, 0};
    int lines = for_each_line(sizing, measure_line, &sz);
    free(sizing);
    RP_CHECK(lines, "no text: give --text or lines on standard input");
    int V = lm.cfg.model.vocab_size, longest = sz.longest;
    if (lm.cfg.model.absolute_position && longest > lm.cfg.model.max_position)
        longest = lm.cfg.model.max_position; /* fill_line refuses a longer line by its number */
    size_t n = (size_t)longest;
    FillMask fm = {.lm = &lm, .ids = sz.ids, .types = xmalloc(sizeof(int) * n), .attn = xmalloc(sizeof(int) * n),
                   .labels = xmalloc(sizeof(int) * n), .logits = xalloc_floats((size_t)sz.most_masks * V + 1),
                   .probs = xalloc_floats((size_t)V)};
    activations_create(&fm.acts, &lm.model, 1, longest, sz.most_masks, precision);
    FillLines fl = {&fm, top_k};
    for_each_line(input, fill_visit, &fl);
    activations_free(&fm.acts);
    int *ints[] = {fm.ids, fm.types, fm.attn, fm.labels};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        free(ints[i]);
    free(fm.logits);
    free(fm.probs);
    free(input);
    loaded_model_free(&lm);
    return 0;
}
