/* Layer primitives. Each forward is compared with a double-precision reference written here;
 * each backward with central differences of that reference's loss sum(w . out), w random
 * (so d_out = w). Also: parameter gradients accumulate (a second call doubles them), input
 * gradients overwrite (d_in starts as NaN), the documented aliasing works, and forward and
 * backward give the same bits with 1 and 2 OpenMP threads. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "../core/common.h"
#include "../core/rng.h"
#include "../layers/layers.h"
#include "check.h"

static const double FD_STEP = 1e-5;  /* central-difference step on the double references */
static const double GRAD_TOL = 1e-4; /* max |analytic - numeric| / max |numeric| */

/* ---- helpers ---------------------------------------------------------------------------- */

static float *random_floats(Rng *rng, size_t n, float lo, float hi) {
    float *x = xalloc_floats(n);
    for (size_t k = 0; k < n; k++)
        x[k] = lo + (hi - lo) * rng_uniform(rng);
    return x;
}

static int *random_ints(Rng *rng, size_t n, int below) {
    int *x = xmalloc(n * sizeof *x);
    for (size_t k = 0; k < n; k++)
        x[k] = (int)rng_below(rng, (uint64_t)below);
    return x;
}

static float *nan_floats(size_t n) {
    float *x = xalloc_floats(n);
    for (size_t k = 0; k < n; k++)
        x[k] = NAN;
    return x;
}

static float *copy_floats(const float *x, size_t n) {
    float *y = xalloc_floats(n);
    memcpy(y, x, n * sizeof *x);
    return y;
}

static double *to_doubles(const float *x, size_t n) {
    double *y = xmalloc(n * sizeof *y);
    for (size_t k = 0; k < n; k++)
        y[k] = x[k];
    return y;
}

/* max_k |a_k - b_k| / max_k |b_k| (NaN in a gives NaN, which fails every "<" check) */
static double rel_err(const float *a, const double *b, size_t n) {
    double err = 0.0, scale = 1e-30;
    for (size_t k = 0; k < n; k++) {
        double d = fabs(a[k] - b[k]);
        err = d > err || isnan(d) ? d : err;
        scale = fmax(scale, fabs(b[k]));
    }
    return err / scale;
}

/* second call of an accumulating backward: twice - 2 * once, relative */
static double doubling_err(const float *twice, const float *once, size_t n) {
    double *expected = xmalloc(n * sizeof *expected);
    for (size_t k = 0; k < n; k++)
        expected[k] = 2.0 * once[k];
    double err = rel_err(twice, expected, n);
    free(expected);
    return err;
}

static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* d loss / d param[k] by central differences; loss(ctx) reads param. Caller frees. */
typedef double (*LossFn)(const void *ctx);
static double *numeric_grad(double *param, size_t n, LossFn loss, const void *ctx) {
    double *grad = xmalloc(n * sizeof *grad);
    for (size_t k = 0; k < n; k++) {
        const double saved = param[k];
        param[k] = saved + FD_STEP;
        const double up = loss(ctx);
        param[k] = saved - FD_STEP;
        const double down = loss(ctx);
        param[k] = saved;
        grad[k] = (up - down) / (2.0 * FD_STEP);
    }
    return grad;
}

static void check_grad(TestTally *t, const char *what, const float *analytic, double *param,
                       size_t n, LossFn loss, const void *ctx) {
    double *numeric = numeric_grad(param, n, loss, ctx);
    double err = rel_err(analytic, numeric, n);
    CHECK(t, err < GRAD_TOL, "%s matches finite differences (rel err %.2e)", what, err);
    free(numeric);
}

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
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const int N = 33, I = 70, O = 45;
        float *in = random_floats(rng, N * I, -1, 1), *W = random_floats(rng, O * I, -1, 1);
        float *b = with_bias ? random_floats(rng, O, -1, 1) : NULL, *out = nan_floats(N * O);
        linear_forward(out, in, W, b, N, I, O);
        LinearRef r = {N, I, O, to_doubles(in, N * I), to_doubles(W, O * I),
                       b ? to_doubles(b, O) : NULL, NULL};
        double *expected = xmalloc(N * O * sizeof *expected);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < O; j++)
                expected[n * O + j] = linear_ref_out(&r, n, j);
        double err = rel_err(out, expected, N * O);
        CHECK(t, err < 1e-5, "linear_forward %s bias matches a naive triple loop (rel err %.2e)",
              with_bias ? "with" : "without", err);
        free(in), free(W), free(b), free(out), free(r.in), free(r.W), free(r.b), free(expected);
    }

    const int N = 4, I = 6, O = 3;
    float *in = random_floats(rng, N * I, -1, 1), *W = random_floats(rng, O * I, -1, 1);
    float *b = random_floats(rng, O, -1, 1), *w = random_floats(rng, N * O, -1, 1);
    float *d_in = nan_floats(N * I), *dW = xalloc_floats(O * I), *db = xalloc_floats(O);
    linear_backward(d_in, dW, db, w, in, W, N, I, O);
    LinearRef r = {N, I, O, to_doubles(in, N * I), to_doubles(W, O * I), to_doubles(b, O),
                   to_doubles(w, N * O)};
    check_grad(t, "linear d_in (prefilled NaN)", d_in, r.in, N * I, linear_loss, &r);
    check_grad(t, "linear dW", dW, r.W, O * I, linear_loss, &r);
    check_grad(t, "linear db", db, r.b, O, linear_loss, &r);
    float *dW_once = copy_floats(dW, O * I), *db_once = copy_floats(db, O);
    linear_backward(NULL, dW, db, w, in, W, N, I, O); /* also: d_in NULL is skipped */
    double err = fmax(doubling_err(dW, dW_once, O * I), doubling_err(db, db_once, O));
    CHECK(t, err < 1e-6, "linear dW, db accumulate: second call doubles them (rel err %.2e)", err);
    free(in), free(W), free(b), free(w), free(d_in), free(dW), free(db), free(dW_once);
    free(db_once), free(r.in), free(r.W), free(r.b), free(r.w);
}

static void test_linear_threads(TestTally *t, Rng *rng) {
    const int N = 64, I = 96, O = 80;
    float *in = random_floats(rng, N * I, -1, 1), *W = random_floats(rng, O * I, -1, 1);
    float *b = random_floats(rng, O, -1, 1), *d_out = random_floats(rng, N * O, -1, 1);
    float *out[2], *d_in[2], *dW[2], *db[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        out[run] = xalloc_floats(N * O), d_in[run] = xalloc_floats(N * I);
        dW[run] = xalloc_floats(O * I), db[run] = xalloc_floats(O);
        linear_forward(out[run], in, W, b, N, I, O);
        linear_backward(d_in[run], dW[run], db[run], d_out, in, W, N, I, O);
    }
    CHECK(t, same_bits(out[0], out[1], N * O) && same_bits(d_in[0], d_in[1], N * I) &&
                 same_bits(dW[0], dW[1], O * I) && same_bits(db[0], db[1], O),
          "linear forward/backward bit-identical with 1 and 2 threads (N=%d i=%d o=%d)", N, I, O);
    free(in), free(W), free(b), free(d_out);
    for (int run = 0; run < 2; run++)
        free(out[run]), free(d_in[run]), free(dW[run]), free(db[run]);
}

/* ---- layernorm -------------------------------------------------------------------------- */

typedef struct {
    int N, C;
    double eps, *in, *gamma, *beta, *w;
} LayerNormRef;

/* out row n (C doubles); returns the row's rstd */
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
    double *row = xmalloc(r->C * sizeof *row), mu, loss = 0.0;
    for (int n = 0; n < r->N; n++) {
        layernorm_ref_row(r, n, row, &mu);
        for (int c = 0; c < r->C; c++)
            loss += r->w[n * r->C + c] * row[c];
    }
    free(row);
    return loss;
}

static void test_layernorm(TestTally *t, Rng *rng, int N, int C) {
    const float eps = 1e-5f;
    float *in = random_floats(rng, N * C, -1, 1), *w = random_floats(rng, N * C, -1, 1);
    for (int k = 0; k < N * C; k++)
        in[k] += (float)(k / C); /* row means 0..N-1 */
    float *gamma = random_floats(rng, C, 0.5f, 1.5f), *beta = random_floats(rng, C, -1, 1);
    float *out = nan_floats(N * C), *mean = nan_floats(N), *rstd = nan_floats(N);
    layernorm_forward(out, mean, rstd, in, gamma, beta, N, C, eps);
    LayerNormRef r = {N, C, eps, to_doubles(in, N * C), to_doubles(gamma, C),
                      to_doubles(beta, C), to_doubles(w, N * C)};
    double *expected = xmalloc(N * C * sizeof *expected), *exp_mean = xmalloc(N * sizeof(double));
    double *exp_rstd = xmalloc(N * sizeof(double));
    for (int n = 0; n < N; n++)
        exp_rstd[n] = layernorm_ref_row(&r, n, expected + n * C, exp_mean + n);
    double err = fmax(rel_err(out, expected, N * C),
                      fmax(rel_err(mean, exp_mean, N), rel_err(rstd, exp_rstd, N)));
    CHECK(t, err < 1e-5, "layernorm_forward N=%d C=%d: out, mean, rstd match (rel err %.2e)", N,
          C, err);

    float *d_in = nan_floats(N * C), *d_gamma = xalloc_floats(C), *d_beta = xalloc_floats(C);
    layernorm_backward(d_in, d_gamma, d_beta, w, in, gamma, mean, rstd, N, C);
    check_grad(t, "layernorm d_in (prefilled NaN)", d_in, r.in, N * C, layernorm_loss, &r);
    check_grad(t, "layernorm d_gamma", d_gamma, r.gamma, C, layernorm_loss, &r);
    check_grad(t, "layernorm d_beta", d_beta, r.beta, C, layernorm_loss, &r);
    float *d_gamma_once = copy_floats(d_gamma, C), *d_beta_once = copy_floats(d_beta, C);
    float *aliased = copy_floats(w, N * C); /* d_in == d_out */
    layernorm_backward(aliased, d_gamma, d_beta, aliased, in, gamma, mean, rstd, N, C);
    CHECK(t, same_bits(aliased, d_in, N * C), "layernorm_backward with d_in == d_out");
    err = fmax(doubling_err(d_gamma, d_gamma_once, C), doubling_err(d_beta, d_beta_once, C));
    CHECK(t, err < 1e-6, "layernorm d_gamma, d_beta accumulate (rel err %.2e)", err);
    free(in), free(w), free(gamma), free(beta), free(out), free(mean), free(rstd), free(d_in);
    free(d_gamma), free(d_beta), free(d_gamma_once), free(d_beta_once), free(aliased);
    free(r.in), free(r.gamma), free(r.beta), free(r.w), free(expected), free(exp_mean);
    free(exp_rstd);
}

static void test_layernorm_threads(TestTally *t, Rng *rng) {
    const int N = 64, C = 300; /* 5 column blocks, the last one partial */
    float *in = random_floats(rng, N * C, -2, 2), *d_out = random_floats(rng, N * C, -1, 1);
    float *gamma = random_floats(rng, C, 0.5f, 1.5f), *beta = random_floats(rng, C, -1, 1);
    float *out[2], *mean[2], *rstd[2], *d_in[2], *d_gamma[2], *d_beta[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        out[run] = xalloc_floats(N * C), mean[run] = xalloc_floats(N);
        rstd[run] = xalloc_floats(N), d_in[run] = xalloc_floats(N * C);
        d_gamma[run] = xalloc_floats(C), d_beta[run] = xalloc_floats(C);
        layernorm_forward(out[run], mean[run], rstd[run], in, gamma, beta, N, C, 1e-12f);
        layernorm_backward(d_in[run], d_gamma[run], d_beta[run], d_out, in, gamma, mean[run],
                           rstd[run], N, C);
    }
    CHECK(t, same_bits(out[0], out[1], N * C) && same_bits(d_in[0], d_in[1], N * C) &&
                 same_bits(d_gamma[0], d_gamma[1], C) && same_bits(d_beta[0], d_beta[1], C),
          "layernorm forward/backward bit-identical with 1 and 2 threads (N=%d C=%d)", N, C);
    free(in), free(d_out), free(gamma), free(beta);
    for (int run = 0; run < 2; run++)
        free(out[run]), free(mean[run]), free(rstd[run]), free(d_in[run]), free(d_gamma[run]),
            free(d_beta[run]);
}

/* ---- embedding -------------------------------------------------------------------------- */

typedef struct {
    int B, L, H;
    const int *ids, *types;
    double *word, *type, *pos, *w; /* pos may be NULL */
} EmbeddingRef;

static double embedding_loss(const void *ctx) {
    const EmbeddingRef *r = ctx;
    double loss = 0.0;
    for (int n = 0; n < r->B * r->L; n++)
        for (int c = 0; c < r->H; c++)
            loss += r->w[n * r->H + c] *
                    (r->word[r->ids[n] * r->H + c] + r->type[r->types[n] * r->H + c] +
                     (r->pos ? r->pos[(n % r->L) * r->H + c] : 0.0));
    return loss;
}

static void test_embedding(TestTally *t, Rng *rng, int use_pos) {
    const int B = 2, L = 5, H = 7, V = 4, T = 2, P = 6, N = B * L; /* 10 ids over 4 rows */
    int *ids = random_ints(rng, N, V), *types = random_ints(rng, N, T);
    float *word = random_floats(rng, V * H, -1, 1), *type = random_floats(rng, T * H, -1, 1);
    float *pos = use_pos ? random_floats(rng, P * H, -1, 1) : NULL;
    float *w = random_floats(rng, N * H, -1, 1), *out = nan_floats(N * H);
    EmbeddingRef r = {B, L, H, ids, types, to_doubles(word, V * H), to_doubles(type, T * H),
                      pos ? to_doubles(pos, P * H) : NULL, NULL};
    embedding_forward(out, ids, types, word, type, pos, B, L, H);
    double *expected = xcalloc(N * H, sizeof *expected);
    for (int k = 0; k < N * H; k++) {
        r.w = expected; /* loss with a one-hot w reads out element k */
        expected[k] = 1.0;
        double value = embedding_loss(&r);
        expected[k] = 0.0;
        out[k] -= (float)value; /* out now holds the error */
    }
    double err = rel_err(out, expected, N * H); /* against zeros: absolute error */
    CHECK(t, err < 1e-5 * 1e30, "embedding_forward %s pos matches (max abs err %.2e)",
          use_pos ? "with" : "without", err * 1e-30);
    r.w = to_doubles(w, N * H);
    float *d_word = xalloc_floats(V * H), *d_type = xalloc_floats(T * H);
    float *d_pos = use_pos ? xalloc_floats(P * H) : NULL;
    embedding_backward(d_word, d_type, d_pos, w, ids, types, B, L, H);
    check_grad(t, "embedding d_word (repeated ids)", d_word, r.word, V * H, embedding_loss, &r);
    check_grad(t, "embedding d_type", d_type, r.type, T * H, embedding_loss, &r);
    if (use_pos)
        check_grad(t, "embedding d_pos", d_pos, r.pos, P * H, embedding_loss, &r);
    float *d_word_once = copy_floats(d_word, V * H);
    embedding_backward(d_word, d_type, d_pos, w, ids, types, B, L, H);
    err = doubling_err(d_word, d_word_once, V * H);
    CHECK(t, err < 1e-6, "embedding d_word accumulates (rel err %.2e)", err);
    free(ids), free(types), free(word), free(type), free(pos), free(w), free(out), free(expected);
    free(r.word), free(r.type), free(r.pos), free(r.w), free(d_word), free(d_type), free(d_pos);
    free(d_word_once);
}

static void test_embedding_threads(TestTally *t, Rng *rng) {
    const int B = 4, L = 32, H = 200, V = 7, T = 2, N = B * L;
    int *ids = random_ints(rng, N, V), *types = random_ints(rng, N, T);
    float *word = random_floats(rng, V * H, -1, 1), *type = random_floats(rng, T * H, -1, 1);
    float *pos = random_floats(rng, L * H, -1, 1), *d_out = random_floats(rng, N * H, -1, 1);
    float *out[2], *d_word[2], *d_type[2], *d_pos[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        out[run] = xalloc_floats(N * H), d_word[run] = xalloc_floats(V * H);
        d_type[run] = xalloc_floats(T * H), d_pos[run] = xalloc_floats(L * H);
        embedding_forward(out[run], ids, types, word, type, pos, B, L, H);
        embedding_backward(d_word[run], d_type[run], d_pos[run], d_out, ids, types, B, L, H);
    }
    CHECK(t, same_bits(out[0], out[1], N * H) && same_bits(d_word[0], d_word[1], V * H) &&
                 same_bits(d_type[0], d_type[1], T * H) && same_bits(d_pos[0], d_pos[1], L * H),
          "embedding forward/backward bit-identical with 1 and 2 threads (N=%d H=%d V=%d)", N, H,
          V);
    free(ids), free(types), free(word), free(type), free(pos), free(d_out);
    for (int run = 0; run < 2; run++)
        free(out[run]), free(d_word[run]), free(d_type[run]), free(d_pos[run]);
}
