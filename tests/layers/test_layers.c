/* Layer primitives with parameters: linear, layernorm, embedding (the pointwise and row-wise
 * ops are in test_layers_pointwise.c). Each forward is compared with a double-precision
 * reference written here; each backward with central differences of that reference's loss
 * sum(w . out), w random (so d_out = w). Also: parameter gradients accumulate (a second call
 * doubles them), input gradients overwrite (d_in starts as NaN), the documented aliasing works,
 * and forward and backward give the same bits with 1 and 2 OpenMP threads at sizes spanning
 * several work blocks. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"

/* ---- linear ----------------------------------------------------------------------------- */

typedef struct {
    int N, I, O;
    double *in, *W, *b, *w;
} LinearRef;

static double linear_ref_out(const LinearRef *r, int n, int j) {
    double acc = r->b ? r->b[j] : 0.0;
    for (int k = 0; k < r->I; k++)
        acc += r->in[n * r->I + k] * r->W[j * r->I + k];
    return acc;
}

static double linear_loss(const void *ctx) {
    const LinearRef *r = ctx;
    double loss = 0.0;
    for (int n = 0; n < r->N; n++)
        for (int j = 0; j < r->O; j++)
            loss += r->w[n * r->O + j] * linear_ref_out(r, n, j);
    return loss;
}

static void test_linear(TestTally *t, Rng *rng) {
    Pool pool = {0};
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const int N = 33, I = 70, O = 45;
        float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -1, 1);
        float *b = with_bias ? uniform(&pool, rng, O, -1, 1) : NULL, *out = nans(&pool, N * O);
        linear_forward(out, in, W, b, N, I, O);
        LinearRef r = {N, I, O, doubles(&pool, in, N * I), doubles(&pool, W, O * I),
                       b ? doubles(&pool, b, O) : NULL, NULL};
        double *expected = pool_alloc(&pool, N * O, sizeof *expected);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < O; j++)
                expected[n * O + j] = linear_ref_out(&r, n, j);
        double err = rel_err(out, expected, N * O);
        CHECK(t, err < 1e-5, "linear_forward %s bias matches a naive triple loop (rel err %.2e)",
              with_bias ? "with" : "without", err);
    }

    const int N = 4, I = 6, O = 3;
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -1, 1);
    float *b = uniform(&pool, rng, O, -1, 1), *w = uniform(&pool, rng, N * O, -1, 1);
    float *d_in = nans(&pool, N * I), *dW = zeros(&pool, O * I), *db = zeros(&pool, O);
    linear_backward(d_in, dW, db, w, in, W, N, I, O);
    LinearRef r = {N, I, O, doubles(&pool, in, N * I), doubles(&pool, W, O * I),
                   doubles(&pool, b, O), doubles(&pool, w, N * O)};
    check_grad(t, &pool, "linear d_in (prefilled NaN)", d_in, r.in, N * I, linear_loss, &r);
    check_grad(t, &pool, "linear dW", dW, r.W, O * I, linear_loss, &r);
    check_grad(t, &pool, "linear db", db, r.b, O, linear_loss, &r);
    float *dW_once = copy(&pool, dW, O * I), *db_once = copy(&pool, db, O);
    linear_backward(NULL, dW, db, w, in, W, N, I, O); /* also: d_in NULL is skipped */
    double err = fmax(doubling_err(&pool, dW, dW_once, O * I), doubling_err(&pool, db, db_once, O));
    CHECK(t, err < 1e-6, "linear dW, db accumulate: second call doubles them (rel err %.2e)", err);
    pool_release(&pool);
}

/* OpenBLAS's GEMM partitions work by thread count, and its Haswell kernels then round
 * differently, so the GEMM outputs are bit-identical only for a given thread count; db (ours)
 * is bit-identical for any. Runs: 1 thread, 2 threads, 2 threads. */
static void test_linear_threads(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 64, I = 96, O = 80; /* big enough for OpenBLAS to use both threads */
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -1, 1);
    float *b = uniform(&pool, rng, O, -1, 1), *d_out = uniform(&pool, rng, N * O, -1, 1);
    float *out[3], *d_in[3], *dW[3], *db[3];
    for (int run = 0; run < 3; run++) {
        omp_set_num_threads(run ? 2 : 1);
        out[run] = zeros(&pool, N * O), d_in[run] = zeros(&pool, N * I);
        dW[run] = zeros(&pool, O * I), db[run] = zeros(&pool, O);
        linear_forward(out[run], in, W, b, N, I, O);
        linear_backward(d_in[run], dW[run], db[run], d_out, in, W, N, I, O);
    }
    CHECK(t, same_bits(out[1], out[2], N * O) && same_bits(d_in[1], d_in[2], N * I) &&
                 same_bits(dW[1], dW[2], O * I) && same_bits(db[1], db[2], O),
          "linear forward/backward bit-identical in two runs with 2 threads (N=%d i=%d o=%d)", N,
          I, O);
    double err = fmax(rel_err(out[1], doubles(&pool, out[0], N * O), N * O),
                      fmax(rel_err(d_in[1], doubles(&pool, d_in[0], N * I), N * I),
                           rel_err(dW[1], doubles(&pool, dW[0], O * I), O * I)));
    CHECK(t, err < 1e-5 && same_bits(db[0], db[1], O),
          "linear with 1 vs 2 threads: db bit-identical, GEMM outputs within rel %.2e", err);
    pool_release(&pool);
}

/* ---- layernorm -------------------------------------------------------------------------- */

typedef struct {
    int N, C;
    double eps, *in, *gamma, *beta, *w;
} LayerNormRef;

/* row n of the output into out[C]; returns rstd, stores the mean */
static double layernorm_ref_row(const LayerNormRef *r, int n, double *out, double *mean) {
    const double *x = r->in + (size_t)n * r->C;
    double mu = 0.0, var = 0.0;
    for (int c = 0; c < r->C; c++)
        mu += x[c] / r->C;
    for (int c = 0; c < r->C; c++)
        var += (x[c] - mu) * (x[c] - mu) / r->C;
    const double rs = 1.0 / sqrt(var + r->eps);
    for (int c = 0; c < r->C; c++)
        out[c] = (x[c] - mu) * rs * r->gamma[c] + r->beta[c];
    *mean = mu;
    return rs;
}

static double layernorm_loss(const void *ctx) {
    const LayerNormRef *r = ctx;
    double row[128], mu, loss = 0.0;
    for (int n = 0; n < r->N; n++) {
        layernorm_ref_row(r, n, row, &mu);
        for (int c = 0; c < r->C; c++)
            loss += r->w[n * r->C + c] * row[c];
    }
    return loss;
}

static void test_layernorm(TestTally *t, Rng *rng, int N, int C) {
    Pool pool = {0};
    RP_CHECK(C <= 128, "test_layernorm: C %d > 128", C);
    float *in = uniform(&pool, rng, N * C, -1, 1), *w = uniform(&pool, rng, N * C, -1, 1);
    for (int k = 0; k < N * C; k++)
        in[k] += (float)(k / C); /* row means 0..N-1 */
    float *gamma = uniform(&pool, rng, C, 0.5f, 1.5f), *beta = uniform(&pool, rng, C, -1, 1);
    float *out = nans(&pool, N * C), *mean = nans(&pool, N), *rstd = nans(&pool, N);
    layernorm_forward(out, mean, rstd, in, gamma, beta, N, C, 1e-5f);
    LayerNormRef r = {N, C, 1e-5f, doubles(&pool, in, N * C), doubles(&pool, gamma, C),
                      doubles(&pool, beta, C), doubles(&pool, w, N * C)};
    double *expected = pool_alloc(&pool, N * C, sizeof(double));
    double *exp_mean = pool_alloc(&pool, N, sizeof(double));
    double *exp_rstd = pool_alloc(&pool, N, sizeof(double));
    for (int n = 0; n < N; n++)
        exp_rstd[n] = layernorm_ref_row(&r, n, expected + n * C, exp_mean + n);
    double err = fmax(rel_err(out, expected, N * C),
                      fmax(rel_err(mean, exp_mean, N), rel_err(rstd, exp_rstd, N)));
    CHECK(t, err < 1e-5, "layernorm_forward N=%d C=%d: out, mean, rstd match (rel err %.2e)", N,
          C, err);

    float *d_in = nans(&pool, N * C), *d_gamma = zeros(&pool, C), *d_beta = zeros(&pool, C);
    layernorm_backward(d_in, d_gamma, d_beta, w, in, gamma, mean, rstd, N, C);
    check_grad(t, &pool, "layernorm d_in (prefilled NaN)", d_in, r.in, N * C, layernorm_loss, &r);
    check_grad(t, &pool, "layernorm d_gamma", d_gamma, r.gamma, C, layernorm_loss, &r);
    check_grad(t, &pool, "layernorm d_beta", d_beta, r.beta, C, layernorm_loss, &r);
    float *d_gamma_once = copy(&pool, d_gamma, C), *d_beta_once = copy(&pool, d_beta, C);
    float *aliased = copy(&pool, w, N * C); /* d_in == d_out */
    layernorm_backward(aliased, d_gamma, d_beta, aliased, in, gamma, mean, rstd, N, C);
    CHECK(t, same_bits(aliased, d_in, N * C), "layernorm_backward with d_in == d_out");
    err = fmax(doubling_err(&pool, d_gamma, d_gamma_once, C),
               doubling_err(&pool, d_beta, d_beta_once, C));
    CHECK(t, err < 1e-6, "layernorm d_gamma, d_beta accumulate (rel err %.2e)", err);
    pool_release(&pool);
}

static void test_layernorm_threads(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 64, C = 300; /* 5 column blocks, the last one partial */
    float *in = uniform(&pool, rng, N * C, -2, 2), *d_out = uniform(&pool, rng, N * C, -1, 1);
    float *gamma = uniform(&pool, rng, C, 0.5f, 1.5f), *beta = uniform(&pool, rng, C, -1, 1);
    float *out[2], *mean[2], *rstd[2], *d_in[2], *d_gamma[2], *d_beta[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        out[run] = zeros(&pool, N * C), mean[run] = zeros(&pool, N), rstd[run] = zeros(&pool, N);
        d_in[run] = zeros(&pool, N * C), d_gamma[run] = zeros(&pool, C);
        d_beta[run] = zeros(&pool, C);
        layernorm_forward(out[run], mean[run], rstd[run], in, gamma, beta, N, C, 1e-12f);
        layernorm_backward(d_in[run], d_gamma[run], d_beta[run], d_out, in, gamma, mean[run],
                           rstd[run], N, C);
    }
    CHECK(t, same_bits(out[0], out[1], N * C) && same_bits(d_in[0], d_in[1], N * C) &&
                 same_bits(d_gamma[0], d_gamma[1], C) && same_bits(d_beta[0], d_beta[1], C),
          "layernorm forward/backward bit-identical with 1 and 2 threads (N=%d C=%d)", N, C);
    pool_release(&pool);
}

/* ---- embedding -------------------------------------------------------------------------- */

typedef struct {
    int B, L, H;
    const int *ids, *types;
    double *word, *type, *pos, *w; /* pos may be NULL */
} EmbeddingRef;

static double embedding_ref_out(const EmbeddingRef *r, int n, int c) {
    return r->word[r->ids[n] * r->H + c] + r->type[r->types[n] * r->H + c] +
           (r->pos ? r->pos[(n % r->L) * r->H + c] : 0.0);
}

static double embedding_loss(const void *ctx) {
    const EmbeddingRef *r = ctx;
    double loss = 0.0;
    for (int n = 0; n < r->B * r->L; n++)
        for (int c = 0; c < r->H; c++)
            loss += r->w[n * r->H + c] * embedding_ref_out(r, n, c);
    return loss;
}

static void test_embedding(TestTally *t, Rng *rng, int use_pos) {
    Pool pool = {0};
    const int B = 2, L = 5, H = 7, V = 4, T = 2, P = 6, N = B * L; /* 10 ids over 4 rows */
    int *ids = ints_below(&pool, rng, N, V), *types = ints_below(&pool, rng, N, T);
    float *word = uniform(&pool, rng, V * H, -1, 1), *type = uniform(&pool, rng, T * H, -1, 1);
    float *pos = use_pos ? uniform(&pool, rng, P * H, -1, 1) : NULL;
    float *w = uniform(&pool, rng, N * H, -1, 1), *out = nans(&pool, N * H);
    embedding_forward(out, ids, types, word, type, pos, B, L, H);
    EmbeddingRef r = {B, L, H, ids, types, doubles(&pool, word, V * H),
                      doubles(&pool, type, T * H), pos ? doubles(&pool, pos, P * H) : NULL,
                      doubles(&pool, w, N * H)};
    double *expected = pool_alloc(&pool, N * H, sizeof *expected);
    for (int k = 0; k < N * H; k++)
        expected[k] = embedding_ref_out(&r, k / H, k % H);
    double err = rel_err(out, expected, N * H);
    CHECK(t, err < 1e-6, "embedding_forward %s pos matches (rel err %.2e)",
          use_pos ? "with" : "without", err);
    float *d_word = zeros(&pool, V * H), *d_type = zeros(&pool, T * H);
    float *d_pos = use_pos ? zeros(&pool, P * H) : NULL;
    embedding_backward(d_word, d_type, d_pos, w, ids, types, B, L, H);
    check_grad(t, &pool, "embedding d_word (repeated ids)", d_word, r.word, V * H,
               embedding_loss, &r);
    check_grad(t, &pool, "embedding d_type", d_type, r.type, T * H, embedding_loss, &r);
    if (use_pos)
        check_grad(t, &pool, "embedding d_pos", d_pos, r.pos, P * H, embedding_loss, &r);
    float *d_word_once = copy(&pool, d_word, V * H);
    embedding_backward(d_word, d_type, d_pos, w, ids, types, B, L, H);
    err = doubling_err(&pool, d_word, d_word_once, V * H);
    CHECK(t, err < 1e-6, "embedding d_word accumulates (rel err %.2e)", err);
    pool_release(&pool);
}

static void test_embedding_threads(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int B = 4, L = 32, H = 200, V = 7, T = 2, N = B * L; /* 4 column blocks */
    int *ids = ints_below(&pool, rng, N, V), *types = ints_below(&pool, rng, N, T);
    float *word = uniform(&pool, rng, V * H, -1, 1), *type = uniform(&pool, rng, T * H, -1, 1);
    float *pos = uniform(&pool, rng, L * H, -1, 1), *d_out = uniform(&pool, rng, N * H, -1, 1);
    float *out[2], *d_word[2], *d_type[2], *d_pos[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        out[run] = zeros(&pool, N * H), d_word[run] = zeros(&pool, V * H);
        d_type[run] = zeros(&pool, T * H), d_pos[run] = zeros(&pool, L * H);
        embedding_forward(out[run], ids, types, word, type, pos, B, L, H);
        embedding_backward(d_word[run], d_type[run], d_pos[run], d_out, ids, types, B, L, H);
    }
    CHECK(t, same_bits(out[0], out[1], N * H) && same_bits(d_word[0], d_word[1], V * H) &&
                 same_bits(d_type[0], d_type[1], T * H) && same_bits(d_pos[0], d_pos[1], L * H),
          "embedding forward/backward bit-identical with 1 and 2 threads (N=%d H=%d V=%d)", N, H,
          V);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240607);
    omp_set_num_threads(2);
    test_linear(&t, &rng);
    test_linear_threads(&t, &rng);
    test_layernorm(&t, &rng, 5, 7);
    test_layernorm(&t, &rng, 3, 100); /* d_gamma over two column blocks */
    test_layernorm_threads(&t, &rng);
    test_embedding(&t, &rng, 1);
    test_embedding(&t, &rng, 0);
    test_embedding_threads(&t, &rng);
    return tally_exit(&t);
}
