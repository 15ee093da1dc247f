/* Dynamic padding (task.padding = longest) on one batch, for every position mode and both task
 * heads, with activations laid out once for [B, MAX_L]:
 *  - exact: a batch [B, L'] run in the prefix of a [B + 3, MAX_L] layout gives bit for bit the
 *    logits, loss and gradients of the same batch in a layout of exactly [B, L'] (dropout on), so
 *    no kernel indexes by the layout's B or L instead of the batch's;
 *  - equal up to rounding: padded to its longest sequence (L' = 15 or 22) or to MAX_L = 40, a
 *    batch gives the same classification / span logits, loss and gradients (dropout off: its
 *    masks are drawn over the batch's shape). A padded position is masked as a key and gets -inf
 *    span logits, so it adds exact zeros; what differs is the order of float sums (softmax rows of
 *    L' vs MAX_L terms, GEMMs over B L' vs B MAX_L rows). Tolerance 2e-5 of the largest |value|:
 *    about 170 float ulps, far above a few reordered sums of <= 160 terms, and far below any real
 *    change (dropping the span mask moves the loss by ~0.1). */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/model/loss.h"
#include "train/tasks/task_data.h"
#include "tests/check.h"

enum { B = 4, MAX_L = 40, COUNT = 8, V = 50, C = 3 };
static const SpecialTokens SPECIAL = {0, 1, 2, 3, 4};
#define TOLERANCE 2e-5

typedef struct {
    const char *name;
    RelKind rel;
    int k, residual, residual_mean, pre_norm, absolute;
} Mode;

static const Mode MODES[] = {
    {"absolute", REL_NONE, 0, 0, 0, 0, 1},
    {"shaw k=16 > L'", REL_SHAW, 16, 0, 0, 0, 0},
    {"method1 k=3", REL_METHOD1, 3, 0, 0, 0, 1},
    {"method2 k=5 residual", REL_METHOD2, 5, 1, 0, 0, 0},
    {"method3 k=4 pre-LN", REL_METHOD3, 4, 0, 0, 1, 0},
    {"method4 k=64 residual mean", REL_METHOD4, 64, 1, 1, 0, 1},
};

typedef struct {
    float loss;
    float *logits; /* [B, C] or [B, MAX_L] start then [B, MAX_L] end (-inf past the batch length) */
    float *grads;
} Result;

typedef struct {
    Model m;
    Activations a;
    HeadBuffers hb;
    int span;
} Net;

static void net_create(Net *n, const Mode *mode, int span, float dropout, int layout_B, int layout_L) {
    ModelConfig c = {.hidden_size = 16, .num_layers = 2, .num_heads = 2, .intermediate_size = 32,
                     .vocab_size = V, .max_position = MAX_L, .type_vocab_size = 2,
                     .absolute_position = mode->absolute, .norm = mode->pre_norm ? NORM_PRE : NORM_POST,
                     .hidden_dropout = dropout, .attention_dropout = dropout, .layer_norm_eps = 1e-12f,
                     .init_range = 0.3f, .seed = 5, .relative_position = mode->rel, .relative_k = mode->k,
                     .residual_attention = mode->residual, .residual_attention_mean = mode->residual_mean};
    memset(n, 0, sizeof *n);
    n->span = span;
    model_create(&n->m, &c, span ? (ModelHeads){0, 0, 0, 1} : (ModelHeads){0, 1, C, 0});
    model_init_weights(&n->m, 11);
    activations_create(&n->a, &n->m, layout_B, layout_L, 0, PRECISION_FP32);
    head_buffers_create(&n->hb, &n->m, layout_B, layout_L);
}

static void net_free(Net *n) {
    head_buffers_free(&n->hb);
    activations_free(&n->a);
    model_free(&n->m);
}

/* Forward and backward of sequences rows[0..B) padded to L: loss, logits, gradient block. */
static Result run(Net *n, const TaskFeatures *f, const int *rows, int L) {
    static int ids[B * MAX_L], types[B * MAX_L], mask[B * MAX_L], labels[B], start[B], end[B];
    static float values[B];
    features_fill_batch(f, SPECIAL, rows, B, L, ids, types, mask);
    for (int b = 0; b < B; b++) {
        int r = rows[b];
        labels[b] = r >= 0 ? r % C : IGNORE_LABEL;
        start[b] = r >= 0 ? f->lengths[r] / 3 : IGNORE_LABEL;
        end[b] = r >= 0 ? f->lengths[r] - 2 : IGNORE_LABEL;
        values[b] = 0;
    }
    TrainBatch tb = {{B, L, ids, types, mask, NULL, NULL}, {labels, values, start, end, NULL}, 0};
    LossHead head = loss_head_task(&n->m, &n->a, &n->hb, 0);
    memset(n->m.grads, 0, sizeof(float) * n->m.table.block_floats);
    Result res = {loss_forward(&n->m, &head, &tb, FORWARD_TRAIN, 99).loss, NULL, NULL};
    loss_backward(&n->m, &head, &tb, 1.0f);
    size_t out = n->span ? 2 * B * MAX_L : B * C;
    res.logits = xalloc_floats(out);
    if (n->span) {
        for (size_t i = 0; i < out; i++)
            res.logits[i] = -INFINITY;
        for (int b = 0; b < B; b++) {
            memcpy(res.logits + (size_t)b * MAX_L, n->hb.start + (size_t)b * L, sizeof(float) * (size_t)L);
            memcpy(res.logits + (size_t)(B + b) * MAX_L, n->hb.end + (size_t)b * L, sizeof(float) * (size_t)L);
        }
    } else {
        memcpy(res.logits, n->hb.logits, sizeof(float) * out);
    }
    res.grads = xalloc_floats(n->m.table.block_floats);
    memcpy(res.grads, n->m.grads, sizeof(float) * n->m.table.block_floats);
    return res;
}

static void result_free(Result *r) {
    free(r->logits);
    free(r->grads);
}

/* max |a - b| / max(1, max |a|) over finite entries; infinities must agree */
static double rel_diff(const float *a, const float *b, size_t n) {
    double diff = 0, scale = 1;
    for (size_t i = 0; i < n; i++) {
        if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] != b[i])
                return INFINITY;
            continue;
        }
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)a[i]));
    }
    return diff / scale;
}

int main(void) {
    TestTally t = {0, 0};
    TaskFeatures f;
    features_init(&f, MAX_L);
    Rng rng;
    rng_seed(&rng, 7);
    /* lengths 3..22 tokens with [CLS] and [SEP]s; pairs (segment B) for odd sequences */
    const int text[COUNT] = {9, 3, 13, 1, 20, 6, 11, 2};
    for (int i = 0; i < COUNT; i++) {
        int a[32], len_a = i % 2 ? text[i] / 2 + 1 : text[i], len_b = text[i] - len_a + 1;
        for (int j = 0; j < 32; j++)
            a[j] = 5 + (int)rng_below(&rng, V - 5);
        features_add(&f, SPECIAL, a, len_a, i % 2 ? a + len_a : NULL, len_b, i);
    }
    const int batches[2][B] = {{0, 1, 2, 3}, {4, 5, 6, -1}}; /* longest 15 and 22 (and a padding row) */
    for (int bi = 0; bi < 2; bi++) {
        int L = features_batch_length(&f, batches[bi], B, 1);
        CHECK(&t, L == (bi ? 22 : 15) && features_batch_length(&f, batches[bi], B, 0) == MAX_L,
              "batch %d: padded to its longest sequence (%d), or to max_seq_len", bi, L);
    }

    for (size_t mi = 0; mi < sizeof MODES / sizeof *MODES; mi++)
        for (int span = 0; span <= 1; span++)
            for (int bi = 0; bi < 2; bi++) {
                const Mode *mode = &MODES[mi];
                const char *head = span ? "span" : "classifier";
                int L = features_batch_length(&f, batches[bi], B, 1);
                /* exact: prefix of the [B + 3, MAX_L] layout == a layout of exactly [B, L], dropout on */
                Net big, exact;
                net_create(&big, mode, span, 0.1f, B + 3, MAX_L);
                net_create(&exact, mode, span, 0.1f, B, L);
                Result r_big = run(&big, &f, batches[bi], L), r_exact = run(&exact, &f, batches[bi], L);
                size_t P = big.m.table.block_floats, out = span ? 2 * B * MAX_L : B * C;
                CHECK(&t, r_big.loss == r_exact.loss && !memcmp(r_big.logits, r_exact.logits, sizeof(float) * out) &&
                          !memcmp(r_big.grads, r_exact.grads, sizeof(float) * P),
                      "%s, %s head, batch %d: [%d, %d] in the [%d, %d] layout = in a [%d, %d] layout, bit for bit "
                      "(dropout 0.1)", mode->name, head, bi, B, L, B + 3, MAX_L, B, L);
                result_free(&r_big);
                result_free(&r_exact);
                net_free(&exact);
                net_free(&big);
                /* up to rounding: padded to L vs to MAX_L, dropout off */
                Net n;
                net_create(&n, mode, span, 0.0f, B, MAX_L);
                Result dyn = run(&n, &f, batches[bi], L), full = run(&n, &f, batches[bi], MAX_L);
                double d_logits = rel_diff(full.logits, dyn.logits, out);
                double d_loss = fabs((double)full.loss - dyn.loss) / fmax(1.0, fabs((double)full.loss));
                double d_grads = rel_diff(full.grads, dyn.grads, P);
                CHECK(&t, d_logits <= TOLERANCE && d_loss <= TOLERANCE && d_grads <= TOLERANCE,
                      "%s, %s head, batch %d: padded to %d = padded to %d up to rounding (relative max diff: "
                      "logits %.2g, loss %.2g, gradients %.2g; tolerance %.0e)", mode->name, head, bi, L, MAX_L,
                      d_logits, d_loss, d_grads, TOLERANCE);
                result_free(&dyn);
                result_free(&full);
                net_free(&n);
            }
    features_free(&f);
    return tally_exit(&t);
}
