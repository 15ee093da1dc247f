/* layers/dropout.c: the integer mask test equals hash_uniform >= p, NaN inputs dropped to +0;
 * forward = keep ? in/(1-p) : 0 with the documented mask, the kept fraction, backward with the
 * forward's mask and against central differences, aliasing, another key another mask, p = 0
 * copies, bit-identical results with 1 and 2 threads; dropout_bias_backward against central
 * differences of sum(w . dropout(x + b)) and against dropout_backward plus a column sum, in place,
 * p = 0, db accumulating, bit-identical with 1 and 2 threads. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


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

/* loss = sum(w . dropout(x + b)) over [N, C]: d x = dropout_backward(w), d b = its column sums */
typedef struct {
    int N, C;
    float p;
    uint64_t key;
    double *x, *b, *w;
} DropoutBiasRef;

static double dropout_bias_loss(const void *ctx) {
    const DropoutBiasRef *r = ctx;
    double loss = 0.0;
    for (int e = 0; e < r->N * r->C; e++)
        if (hash_uniform(r->key, (uint32_t)e) >= r->p)
            loss += r->w[e] * (r->x[e] + r->b[e % r->C]) / (1.0 - r->p);
    return loss;
}

static void test_dropout_bias(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 9, C = 70; /* two column blocks, the second partial */
    const float p = 0.3f;
    const uint64_t key = hash_key(4, 8, 15);
    float *x = uniform(&pool, rng, N * C, -1, 1), *b = uniform(&pool, rng, C, -1, 1);
    float *w = uniform(&pool, rng, N * C, -1, 1), *d_in = nans(&pool, N * C), *db = zeros(&pool, C);
    dropout_bias_backward(d_in, db, w, N, C, p, key);
    DropoutBiasRef r = {N, C, p, key, doubles(&pool, x, N * C), doubles(&pool, b, C),
                        doubles(&pool, w, N * C)};
    check_grad(t, &pool, "dropout_bias_backward d_in (prefilled NaN)", d_in, r.x, N * C,
               dropout_bias_loss, &r);
    check_grad(t, &pool, "dropout_bias_backward db", db, r.b, C, dropout_bias_loss, &r);
    for (int zero_p = 0; zero_p < 2; zero_p++) {
        const float drop = zero_p ? 0.0f : p;
        float *unfused = zeros(&pool, N * C), *in_place = copy(&pool, w, N * C);
        float *db_fused = zeros(&pool, C);
        double *db_sum = pool_alloc(&pool, C, sizeof *db_sum);
        dropout_backward(unfused, w, N * C, drop, key);
        for (int e = 0; e < N * C; e++)
            db_sum[e % C] += unfused[e];
        dropout_bias_backward(in_place, db_fused, in_place, N, C, drop, key);
        const double err = rel_err(db_fused, db_sum, C);
        CHECK(t, same_bits(in_place, unfused, N * C) && err < 1e-6,
              "dropout_bias_backward (p=%.1f, d_in == d_out) = dropout_backward (bit-identical) and "
              "its column sums (rel err %.2e)", (double)drop, err);
    }
    float *db_once = copy(&pool, db, C), *scratch = zeros(&pool, N * C);
    dropout_bias_backward(scratch, db, w, N, C, p, key);
    double err = doubling_err(&pool, db, db_once, C);
    CHECK(t, err < 1e-6, "dropout_bias_backward db accumulates (rel err %.2e)", err);

    const int BN = 64, BC = 300;
    float *g = uniform(&pool, rng, BN * BC, -1, 1), *dx[2], *dbias[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        dx[run] = zeros(&pool, BN * BC), dbias[run] = zeros(&pool, BC);
        dropout_bias_backward(dx[run], dbias[run], g, BN, BC, p, key);
    }
    omp_set_num_threads(2);
    CHECK(t, same_bits(dx[0], dx[1], BN * BC) && same_bits(dbias[0], dbias[1], BC),
          "dropout_bias_backward bit-identical with 1 and 2 threads (%dx%d)", BN, BC);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240613);
    omp_set_num_threads(2);
    test_dropout_threshold(&t);
    test_dropout(&t, &rng);
    test_dropout_bias(&t, &rng);
    return tally_exit(&t);
}
