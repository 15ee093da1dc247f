/* layers/layernorm.c: forward (out, mean, rstd) against a double reference (two rows of large
 * mean included), backward's d_in, d_gamma, d_beta against central differences of that
 * reference's loss sum(w . out), d_in prefilled with NaN, d_in == d_out aliasing, d_gamma and
 * d_beta accumulating, bit-identical results with 1 and 2 threads over several column blocks. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


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

/* residual_layernorm_forward = dropout_forward, the residual add and layernorm_forward in one
 * pass: the same sum (bit for bit) and the same normalised output, with and without dropout. */
static void test_residual_layernorm(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 37, C = 100;
    const uint64_t key = hash_key(3, 4, 5);
    float *res = uniform(&pool, rng, N * C, -1, 1), *branch = uniform(&pool, rng, N * C, -1, 1);
    float *gamma = uniform(&pool, rng, C, 0.5f, 1.5f), *beta = uniform(&pool, rng, C, -1, 1);
    for (int dropout = 0; dropout < 2; dropout++) {
        const float p = dropout ? 0.1f : 0.0f;
        float *dropped = zeros(&pool, N * C), *sum = zeros(&pool, N * C), *out = zeros(&pool, N * C);
        float *mean = zeros(&pool, N), *rstd = zeros(&pool, N);
        dropout_forward(dropped, branch, N * C, p, key);
        for (int e = 0; e < N * C; e++)
            sum[e] = res[e] + dropped[e];
        layernorm_forward(out, mean, rstd, sum, gamma, beta, N, C, 1e-5f);
        float *f_sum = nans(&pool, N * C), *f_out = nans(&pool, N * C);
        float *f_mean = nans(&pool, N), *f_rstd = nans(&pool, N);
        residual_layernorm_forward(f_out, f_sum, f_mean, f_rstd, res, branch, gamma, beta, N, C,
                                   1e-5f, p, key);
        const double err = fmax(rel_err(f_out, doubles(&pool, out, N * C), N * C),
                                fmax(rel_err(f_mean, doubles(&pool, mean, N), N),
                                     rel_err(f_rstd, doubles(&pool, rstd, N), N)));
        CHECK(t, same_bits(f_sum, sum, N * C) && err < 1e-6,
              "residual_layernorm_forward (dropout %.1f) = dropout, add, layernorm: sum bit-identical, "
              "out, mean, rstd within %.2e", (double)p, err);
    }
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240611);
    omp_set_num_threads(2);
    test_layernorm(&t, &rng, 5, 7);
    test_layernorm(&t, &rng, 3, 100); /* d_gamma over two column blocks */;
    test_layernorm_threads(&t, &rng);
    test_residual_layernorm(&t, &rng);
    return tally_exit(&t);
}
