/* Pointwise and row-wise layer primitives: gelu, dropout, softmax, crossentropy. Same method as
 * test_layers.c: double-precision references, central differences of sum(w . out) for the
 * backward, NaN-prefilled input gradients, aliasing, and bit-identical results with 1 and 2
 * OpenMP threads. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"

/* ---- gelu ------------------------------------------------------------------------------- */

static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static void test_gelu(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const size_t n = 5000; /* three work blocks, the last one partial */
    float *in = uniform(&pool, rng, n, -6, 6), *w = uniform(&pool, rng, n, -1, 1);
    in[0] = 0.0f, in[1] = -10.0f, in[2] = 10.0f, in[3] = -0.5f;
    float *out = nans(&pool, n), *d_in = nans(&pool, n);
    gelu_forward(out, in, n);
    gelu_backward(d_in, w, in, n);
    double *expected = pool_alloc(&pool, n, sizeof(double));
    double *numeric = pool_alloc(&pool, n, sizeof(double));
    for (size_t e = 0; e < n; e++) { /* elementwise: d loss / d in[e] involves only out[e] */
        expected[e] = gelu_ref(in[e]);
        numeric[e] = w[e] * (gelu_ref(in[e] + FD_STEP) - gelu_ref(in[e] - FD_STEP)) / (2 * FD_STEP);
    }
    double err = rel_err(out, expected, n);
    CHECK(t, err < 1e-6, "gelu_forward matches the erf reference on [-10, 10] (rel err %.2e)", err);
    err = rel_err(d_in, numeric, n);
    CHECK(t, err < GRAD_TOL, "gelu d_in (prefilled NaN) matches finite differences (rel err %.2e)",
          err);
    float *in_place = copy(&pool, in, n), *d_in_place = copy(&pool, w, n);
    gelu_forward(in_place, in_place, n);
    gelu_backward(d_in_place, d_in_place, in, n);
    CHECK(t, same_bits(in_place, out, n) && same_bits(d_in_place, d_in, n),
          "gelu forward with out == in, backward with d_in == d_out");

    const size_t big = 50001;
    float *x = uniform(&pool, rng, big, -5, 5), *d_out = uniform(&pool, rng, big, -1, 1);
    float *y[2], *d_x[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        y[run] = zeros(&pool, big), d_x[run] = zeros(&pool, big);
        gelu_forward(y[run], x, big);
        gelu_backward(d_x[run], d_out, x, big);
    }
    CHECK(t, same_bits(y[0], y[1], big) && same_bits(d_x[0], d_x[1], big),
          "gelu forward/backward bit-identical with 1 and 2 threads (n=%zu)", big);
    pool_release(&pool);
}

/* ---- dropout ---------------------------------------------------------------------------- */

typedef struct {
    size_t n;
    float p;
    uint64_t key;
    double *in, *w;
} DropoutRef;

static double dropout_loss(const void *ctx) {
    const DropoutRef *r = ctx;
    double loss = 0.0;
    for (size_t e = 0; e < r->n; e++)
        if (hash_uniform(r->key, e) >= r->p)
            loss += r->w[e] * r->in[e] / (1.0 - r->p);
    return loss;
}

/* The integer mask test of the dropout kernels equals hash_uniform >= p for every element, also
 * for p exactly on the 2^-24 grid and next to it, and NaN inputs are dropped to +0 as before. */
static void test_dropout_threshold(TestTally *t) {
    const float grid = 1.0f / 16777216.0f;
    const float ps[] = {0.0f, 0.1f, 0.3f, 0.5f, 0.9f, 1.0f - grid, 12345.0f * grid,
                        nextafterf(12345.0f * grid, 1.0f), nextafterf(12345.0f * grid, 0.0f), grid, 1.0f};
    size_t mismatches = 0, checked = 0;
    for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
        const uint32_t threshold = hash_threshold(ps[c]);
        for (uint64_t e = 0; e < 100000; e++, checked++)
            mismatches += (hash_bits24(99, e) >= threshold) != (hash_uniform(99, e) >= ps[c]);
        for (uint32_t b = 12340; b < 12350; b++, checked++) /* the bits right at the threshold */
            mismatches += (b >= threshold) != ((float)b * grid >= ps[c]);
    }
    CHECK(t, mismatches == 0, "hash_bits24 >= hash_threshold(p) <=> hash_uniform >= p (%zu of %zu differ)",
          mismatches, checked);
    float in[64], out[64];
    size_t dropped_nan_ok = 0, dropped = 0;
    for (int e = 0; e < 64; e++)
        in[e] = NAN;
    dropout_span(out, in, 64, 0.5f, 7, 1000);
    for (int e = 0; e < 64; e++)
        if (hash_uniform(7, 1000 + (uint64_t)e) < 0.5f)
            dropped++, dropped_nan_ok += out[e] == 0.0f && !signbit(out[e]);
    CHECK(t, dropped > 0 && dropped_nan_ok == dropped, "dropout_span drops NaN inputs to +0 (%zu of %zu)",
          dropped_nan_ok, dropped);
}

static void test_dropout(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const size_t n = 200000;
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    const uint64_t key = hash_key(7, 3, 11);
    float *in = uniform(&pool, rng, n, 0.5f, 1.5f), *d_out = uniform(&pool, rng, n, 0.5f, 1.5f);
    float *out = nans(&pool, n), *d_in = nans(&pool, n);
    dropout_forward(out, in, n, p, key);
    dropout_backward(d_in, d_out, n, p, key);
    size_t kept = 0, forward_ok = 0, backward_ok = 0;
    for (size_t e = 0; e < n; e++) {
        const int keep = hash_uniform(key, e) >= p;
        kept += keep;
        forward_ok += out[e] == (keep ? in[e] * scale : 0.0f);
        backward_ok += d_in[e] == (out[e] != 0.0f ? d_out[e] * scale : 0.0f);
    }
    CHECK(t, forward_ok == n, "dropout_forward = keep ? in/(1-p) : 0, keep = hash_uniform >= p");
    CHECK(t, fabs((double)kept / n - (1.0 - p)) < 0.01,
          "dropout p=%.1f keeps %.4f of %zu elements (expect %.1f +- 0.01)", (double)p,
          (double)kept / n, n, 1.0 - p);
    CHECK(t, backward_ok == n, "dropout_backward (prefilled NaN) uses the forward's mask");
    DropoutRef r = {64, p, key, doubles(&pool, in, 64), doubles(&pool, d_out, 64)};
    check_grad(t, &pool, "dropout d_in", d_in, r.in, r.n, dropout_loss, &r);

    float *in_place = copy(&pool, in, n), *d_in_place = copy(&pool, d_out, n);
    dropout_forward(in_place, in_place, n, p, key);
    dropout_backward(d_in_place, d_in_place, n, p, key);
    CHECK(t, same_bits(in_place, out, n) && same_bits(d_in_place, d_in, n),
          "dropout forward with out == in, backward with d_in == d_out");
    dropout_forward(out, in, n, p, key + 1);
    size_t differ = 0;
    for (size_t e = 0; e < n; e++)
        differ += (out[e] != 0.0f) != (in_place[e] != 0.0f);
    CHECK(t, differ > n / 10, "dropout: another key gives another mask (%zu of %zu differ)",
          differ, n);
    memcpy(in_place, in, n * sizeof *in);
    dropout_forward(out, in, n, 0.0f, key);
    dropout_forward(in_place, in_place, n, 0.0f, key);
    CHECK(t, same_bits(out, in, n) && same_bits(in_place, in, n),
          "dropout p=0 copies (and leaves out == in untouched)");

    float *y[2], *d_x[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        y[run] = zeros(&pool, n), d_x[run] = zeros(&pool, n);
        dropout_forward(y[run], in, n, p, key);
        dropout_backward(d_x[run], d_out, n, p, key);
    }
    CHECK(t, same_bits(y[0], y[1], n) && same_bits(d_x[0], d_x[1], n),
          "dropout forward/backward bit-identical with 1 and 2 threads (n=%zu)", n);
    pool_release(&pool);
}

/* ---- softmax ---------------------------------------------------------------------------- */

typedef struct {
    int rows, cols;
    double *in, *w;
} SoftmaxRef;

static void softmax_ref_row(double *out, const double *in, int cols) {
    double max = in[0], sum = 0.0;
    for (int c = 1; c < cols; c++)
        max = fmax(max, in[c]);
    for (int c = 0; c < cols; c++)
        sum += out[c] = exp(in[c] - max);
    for (int c = 0; c < cols; c++)
        out[c] /= sum;
}

static double softmax_loss(const void *ctx) {
    const SoftmaxRef *r = ctx;
    double row[64], loss = 0.0;
    for (int n = 0; n < r->rows; n++) {
        softmax_ref_row(row, r->in + n * r->cols, r->cols);
        for (int c = 0; c < r->cols; c++)
            loss += r->w[n * r->cols + c] * row[c];
    }
    return loss;
}

static void test_softmax(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int rows = 5, cols = 7, n = rows * cols;
    float *in = uniform(&pool, rng, n, -3, 3), *w = uniform(&pool, rng, n, -1, 1);
    for (int c = 0; c < cols; c++)
        in[2 * cols + c] += 100.0f; /* exp overflows without the max shift */
    float *out = nans(&pool, n), *d_in = nans(&pool, n);
    softmax_forward(out, in, rows, cols);
    softmax_backward(d_in, w, out, rows, cols);
    SoftmaxRef r = {rows, cols, doubles(&pool, in, n), doubles(&pool, w, n)};
    double *expected = pool_alloc(&pool, n, sizeof *expected);
    for (int row = 0; row < rows; row++)
        softmax_ref_row(expected + row * cols, r.in + row * cols, cols);
    double err = rel_err(out, expected, n);
    CHECK(t, err < 1e-6, "softmax_forward matches (a row offset by +100 included; rel err %.2e)",
          err);
    check_grad(t, &pool, "softmax d_in (prefilled NaN)", d_in, r.in, n, softmax_loss, &r);
    float *in_place = copy(&pool, in, n), *d_in_place = copy(&pool, w, n);
    softmax_forward(in_place, in_place, rows, cols);
    softmax_backward(d_in_place, d_in_place, out, rows, cols);
    CHECK(t, same_bits(in_place, out, n) && same_bits(d_in_place, d_in, n),
          "softmax forward with out == in, backward with d_in == d_out");
    for (int c = 0; c < cols; c++)
        in_place[c] = -INFINITY;
    softmax_row_forward(in_place, in_place, cols);
    int all_zero = 1;
    for (int c = 0; c < cols; c++)
        all_zero &= in_place[c] == 0.0f;
    CHECK(t, all_zero, "softmax of an all -inf row is all zeros");
    /* NaN is never masking: the max skips NaN, so these rows reach the all -inf branch too. */
    for (int kind = 0; kind < 2; kind++) {
        for (int c = 0; c < cols; c++)
            in_place[c] = kind == 0 || c == 3 ? NAN : -INFINITY;
        float lse = softmax_row_normalize(in_place, in_place, cols, softmax_row_max(in_place, cols));
        int all_nan = isnan(lse);
        for (int c = 0; c < cols; c++)
            all_nan &= isnan(in_place[c]);
        CHECK(t, all_nan, "softmax of a row of %s is NaN, not the zeros of a masked row",
              kind == 0 ? "NaN" : "-inf and one NaN");
    }

    const int big_rows = 64, big_cols = 300, big = big_rows * big_cols;
    float *x = uniform(&pool, rng, big, -5, 5), *d_out = uniform(&pool, rng, big, -1, 1);
    float *probs[2], *d_x[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        probs[run] = zeros(&pool, big), d_x[run] = zeros(&pool, big);
        softmax_forward(probs[run], x, big_rows, big_cols);
        softmax_backward(d_x[run], d_out, probs[run], big_rows, big_cols);
    }
    CHECK(t, same_bits(probs[0], probs[1], big) && same_bits(d_x[0], d_x[1], big),
          "softmax forward/backward bit-identical with 1 and 2 threads (%dx%d)", big_rows,
          big_cols);
    pool_release(&pool);
}

/* ---- crossentropy ----------------------------------------------------------------------- */

typedef struct {
    int M, V;
    const int *labels;
    double *logits, d_loss; /* loss is scaled by d_loss so its gradient is d_logits */
} CrossEntropyRef;

static double crossentropy_loss(const void *ctx) {
    const CrossEntropyRef *r = ctx;
    double row[64], loss = 0.0;
    int labelled = 0;
    for (int m = 0; m < r->M; m++) {
        if (r->labels[m] == IGNORE_LABEL)
            continue;
        softmax_ref_row(row, r->logits + m * r->V, r->V);
        loss -= log(row[r->labels[m]]);
        labelled++;
    }
    return labelled ? r->d_loss * loss / labelled : 0.0;
}

/* rows whose first maximal logit is at the label */
static int argmax_correct(const float *logits, const int *labels, int M, int V) {
    int correct = 0;
    for (int m = 0; m < M; m++) {
        int best = 0;
        for (int c = 1; c < V; c++)
            best = logits[m * V + c] > logits[m * V + best] ? c : best;
        correct += labels[m] == best;
    }
    return correct;
}

static void test_crossentropy(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int M = 6, V = 11, n = M * V;
    const float d_loss = 1.7f;
    int *labels = ints_below(&pool, rng, M, V);
    labels[1] = labels[4] = IGNORE_LABEL;
    float *logits = uniform(&pool, rng, n, -3, 3), *probs = nans(&pool, n);
    float *d_logits = nans(&pool, n);
    for (int m = 0; m < M; m += 3) /* rows 0 and 3 predict their label */
        logits[m * V + labels[m]] += 4.0f;
    int n_correct = -1;
    const float loss = crossentropy_forward(probs, &n_correct, logits, labels, M, V);
    crossentropy_backward(d_logits, probs, labels, M, V, d_loss);
    CrossEntropyRef r = {M, V, labels, doubles(&pool, logits, n), 1.0};
    const double expected_loss = crossentropy_loss(&r);
    double *expected = pool_alloc(&pool, n, sizeof *expected);
    for (int m = 0; m < M; m++)
        softmax_ref_row(expected + m * V, r.logits + m * V, V);
    double err = fmax(fabs(loss - expected_loss) / expected_loss, rel_err(probs, expected, n));
    CHECK(t, err < 1e-6, "crossentropy_forward loss %.6f and probs match (rel err %.2e)",
          (double)loss, err);
    const int expected_correct = argmax_correct(logits, labels, M, V);
    CHECK(t, n_correct == expected_correct, "crossentropy n_correct %d (expected %d)", n_correct,
          expected_correct);
    r.d_loss = d_loss;
    check_grad(t, &pool, "crossentropy d_logits (-100 rows, d_loss 1.7, prefilled NaN)", d_logits,
               r.logits, n, crossentropy_loss, &r);

    float *aliased = copy(&pool, logits, n);
    int alias_correct = -1;
    const float alias_loss = crossentropy_forward(aliased, &alias_correct, aliased, labels, M, V);
    int ok = alias_loss == loss && alias_correct == n_correct && same_bits(aliased, probs, n);
    crossentropy_backward(aliased, aliased, labels, M, V, d_loss);
    CHECK(t, ok && same_bits(aliased, d_logits, n),
          "crossentropy with probs == logits and d_logits == probs");

    /* ties go to the lowest index: row 0 (label 5) is wrong, row 1 (label 2) right */
    const int tie_labels[3] = {5, 2, 0};
    float tie_logits[3 * 8] = {0}, tie_probs[3 * 8];
    for (int m = 0; m < 2; m++)
        tie_logits[m * 8 + 2] = tie_logits[m * 8 + 5] = 3.0f;
    tie_logits[2 * 8 + 7] = 1.0f;
    crossentropy_forward(tie_probs, &n_correct, tie_logits, tie_labels, 3, 8);
    CHECK(t, n_correct == 1, "crossentropy argmax ties go to the lowest index (%d correct)",
          n_correct);

    CHECK(t, IGNORE_LABEL == -100, "IGNORE_LABEL is PyTorch's ignore_index -100 (the batch files "
          "of tests/reference/reference.py use it)");
    const int none[2] = {IGNORE_LABEL, IGNORE_LABEL};
    const float none_loss = crossentropy_forward(probs, &n_correct, logits, none, 2, V);
    crossentropy_backward(d_logits, probs, none, 2, V, d_loss);
    int all_zero = 1;
    for (int k = 0; k < 2 * V; k++)
        all_zero &= d_logits[k] == 0.0f;
    CHECK(t, none_loss == 0.0f && n_correct == 0 && all_zero,
          "crossentropy with every label -100: loss 0, no correct rows, zero gradient");

    const int big_M = 8, vocab = 30522, big = big_M * vocab;
    int *big_labels = ints_below(&pool, rng, big_M, vocab), correct[2];
    big_labels[3] = IGNORE_LABEL;
    float *x = uniform(&pool, rng, big, -8, 8), *p[2], *d_x[2], big_loss[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        p[run] = zeros(&pool, big), d_x[run] = zeros(&pool, big);
        big_loss[run] = crossentropy_forward(p[run], &correct[run], x, big_labels, big_M, vocab);
        crossentropy_backward(d_x[run], p[run], big_labels, big_M, vocab, 1.0f);
    }
    CHECK(t, big_loss[0] == big_loss[1] && correct[0] == correct[1] &&
                 same_bits(p[0], p[1], big) && same_bits(d_x[0], d_x[1], big),
          "crossentropy forward/backward bit-identical with 1 and 2 threads (M=%d V=%d)", big_M,
          vocab);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240608);
    omp_set_num_threads(2);
    test_gelu(&t, &rng);
    test_dropout_threshold(&t);
    test_dropout(&t, &rng);
    test_softmax(&t, &rng);
    test_crossentropy(&t, &rng);
    return tally_exit(&t);
}
