/* layers/layernorm.c: forward (out, mean, rstd) against a double reference (two rows of large
 * mean included), backward's d_in, d_gamma, d_beta against central differences of that
 * reference's loss sum(w . out), d_in prefilled with NaN, d_in == d_out aliasing, d_gamma and
 * d_beta accumulating, bit-identical results with 1 and 2 threads over several column blocks;
 * residual_layernorm_forward against its unfused composition; residual_layernorm_backward against
 * central differences of a residual sum through dropout into a layer norm, against its unfused
 * composition (layernorm_backward, the residual add, dropout_backward, the bias column sum) for
 * every combination of its optional parts, with aliasing, and bit-identical with 1 and 2 threads;
 * rows taken in groups (layernorm.c) against the same rows one call each, bit for bit; the
 * backward's column pass on AVX-512 against its portable loops, bit for bit. */
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

/* residual_layernorm_forward = the bias add, dropout_forward, the residual add and
 * layernorm_forward in one pass: the same sum (bit for bit) and the same normalised output, with
 * and without dropout, with and without the bias. */
static void test_residual_layernorm(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 37, C = 100;
    const uint64_t key = hash_key(3, 4, 5);
    float *res = uniform(&pool, rng, N * C, -1, 1), *branch = uniform(&pool, rng, N * C, -1, 1);
    float *gamma = uniform(&pool, rng, C, 0.5f, 1.5f), *beta = uniform(&pool, rng, C, -1, 1);
    float *bias = uniform(&pool, rng, C, -1, 1), *no_bias = zeros(&pool, C);
    for (int variant = 0; variant < 4; variant++) {
        const float p = variant & 1 ? 0.1f : 0.0f;
        const float *b = variant & 2 ? bias : no_bias;
        float *biased = zeros(&pool, N * C), *sum = zeros(&pool, N * C), *out = zeros(&pool, N * C);
        float *mean = zeros(&pool, N), *rstd = zeros(&pool, N);
        for (int e = 0; e < N * C; e++)
            biased[e] = branch[e] + b[e % C];
        dropout_forward(biased, biased, N * C, p, key);
        for (int e = 0; e < N * C; e++)
            sum[e] = res[e] + biased[e];
        layernorm_forward(out, mean, rstd, sum, gamma, beta, N, C, 1e-5f);
        float *f_sum = nans(&pool, N * C), *f_out = nans(&pool, N * C);
        float *f_mean = nans(&pool, N), *f_rstd = nans(&pool, N);
        residual_layernorm_forward(f_out, f_sum, f_mean, f_rstd, res, branch, b, gamma, beta, N, C,
                                   1e-5f, p, key);
        const double err = fmax(rel_err(f_out, doubles(&pool, out, N * C), N * C),
                                fmax(rel_err(f_mean, doubles(&pool, mean, N), N),
                                     rel_err(f_rstd, doubles(&pool, rstd, N), N)));
        CHECK(t, same_bits(f_sum, sum, N * C) && err < 1e-6,
              "residual_layernorm_forward (dropout %.1f, %s bias) = bias, dropout, add, layernorm: sum "
              "bit-identical, out, mean, rstd within %.2e", (double)p, variant & 2 ? "with" : "zero", err);
    }
    pool_release(&pool);
}

/* The fused backward's reference: sum = res + dropout(branch + bias), loss = sum(w . LN(sum)) +
 * sum(v . sum), so d res = LN'(w) + v (d_sum with d_res = v), d branch = d_branch, d bias = d_bias. */
typedef struct {
    LayerNormRef ln;
    float p;
    uint64_t key;
    double *res, *branch, *bias, *v;
} ResidualRef;

static double residual_loss(const void *ctx) {
    const ResidualRef *r = ctx;
    const int N = r->ln.N, C = r->ln.C;
    double row[128], mu, loss = 0.0;
    for (int e = 0; e < N * C; e++) {
        const double kept = hash_uniform(r->key, (uint32_t)e) >= r->p ? 1.0 / (1.0 - r->p) : 0.0;
        r->ln.in[e] = r->res[e] + kept * (r->branch[e] + r->bias[e % C]);
        loss += r->v[e] * r->ln.in[e];
    }
    for (int n = 0; n < N; n++) {
        layernorm_ref_row(&r->ln, n, row, &mu);
        for (int c = 0; c < C; c++)
            loss += r->ln.w[n * C + c] * row[c];
    }
    return loss;
}

static void test_residual_layernorm_backward(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 6, C = 70; /* two column blocks, the second partial */
    const float p = 0.25f;
    const uint64_t key = hash_key(9, 2, 6);
    float *res = uniform(&pool, rng, N * C, -1, 1), *branch = uniform(&pool, rng, N * C, -1, 1);
    float *bias = uniform(&pool, rng, C, -0.5f, 0.5f), *w = uniform(&pool, rng, N * C, -1, 1);
    float *v = uniform(&pool, rng, N * C, -1, 1), *gamma = uniform(&pool, rng, C, 0.5f, 1.5f);
    float *beta = uniform(&pool, rng, C, -1, 1), *biased = zeros(&pool, N * C);
    for (int e = 0; e < N * C; e++)
        biased[e] = branch[e] + bias[e % C];
    float *sum = zeros(&pool, N * C), *out = zeros(&pool, N * C);
    float *mean = zeros(&pool, N), *rstd = zeros(&pool, N), *stats = nans(&pool, 2 * N);
    residual_layernorm_forward(out, sum, mean, rstd, res, branch, bias, gamma, beta, N, C, 1e-5f, p, key);
    float *d_sum = nans(&pool, N * C), *d_branch = nans(&pool, N * C), *d_bias = zeros(&pool, C);
    float *d_gamma = zeros(&pool, C), *d_beta = zeros(&pool, C);
    residual_layernorm_backward(d_sum, d_branch, d_bias, d_gamma, d_beta, stats, w, v, sum, gamma,
                                mean, rstd, N, C, p, key);
    ResidualRef r = {{N, C, 1e-5f, doubles(&pool, sum, N * C), doubles(&pool, gamma, C),
                      doubles(&pool, beta, C), doubles(&pool, w, N * C)},
                     p, key, doubles(&pool, res, N * C), doubles(&pool, branch, N * C),
                     doubles(&pool, bias, C), doubles(&pool, v, N * C)};
    check_grad(t, &pool, "residual_layernorm_backward d_sum (d_res given, prefilled NaN)", d_sum,
               r.res, N * C, residual_loss, &r);
    check_grad(t, &pool, "residual_layernorm_backward d_branch", d_branch, r.branch, N * C,
               residual_loss, &r);
    check_grad(t, &pool, "residual_layernorm_backward d_bias", d_bias, r.bias, C, residual_loss, &r);
    check_grad(t, &pool, "residual_layernorm_backward d_gamma", d_gamma, r.ln.gamma, C,
               residual_loss, &r);
    check_grad(t, &pool, "residual_layernorm_backward d_beta", d_beta, r.ln.beta, C, residual_loss,
               &r);

    /* against the unfused composition, for each optional part and both aliasings */
    for (int variant = 0; variant < 6; variant++) {
        const int with_res = variant & 1, with_branch = variant >= 2;
        const float drop = variant >= 4 ? 0.0f : p; /* 4, 5: p = 0 copies */
        Pool vp = {0};
        float *ln = zeros(&vp, N * C), *u_gamma = zeros(&vp, C), *u_beta = zeros(&vp, C);
        layernorm_backward(ln, u_gamma, u_beta, w, sum, gamma, mean, rstd, N, C);
        if (with_res)
            for (int e = 0; e < N * C; e++)
                ln[e] += v[e];
        float *u_branch = zeros(&vp, N * C);
        double *u_bias = pool_alloc(&vp, C, sizeof *u_bias);
        dropout_backward(u_branch, ln, N * C, drop, key);
        for (int e = 0; e < N * C; e++)
            u_bias[e % C] += u_branch[e];
        /* d_sum aliases d_res with the residual, d_out without */
        float *f_sum = copy(&vp, with_res ? v : w, N * C), *f_branch = nans(&vp, N * C);
        float *f_bias = zeros(&vp, C), *f_gamma = zeros(&vp, C), *f_beta = zeros(&vp, C);
        residual_layernorm_backward(f_sum, with_branch ? f_branch : NULL, with_branch ? f_bias : NULL,
                                    f_gamma, f_beta, stats, with_res ? w : f_sum, with_res ? f_sum : NULL,
                                    sum, gamma, mean, rstd, N, C, drop, key);
        double err = fmax(rel_err(f_sum, doubles(&vp, ln, N * C), N * C),
                          fmax(rel_err(f_gamma, doubles(&vp, u_gamma, C), C),
                               rel_err(f_beta, doubles(&vp, u_beta, C), C)));
        if (with_branch)
            err = fmax(err, fmax(rel_err(f_branch, doubles(&vp, u_branch, N * C), N * C),
                                 rel_err(f_bias, u_bias, C)));
        CHECK(t, err < 1e-5, "residual_layernorm_backward (%s residual, %s branch, dropout %.2f, d_sum == "
              "%s) = layernorm_backward, add, dropout_backward, bias sum (rel err %.2e)",
              with_res ? "with" : "no", with_branch ? "with" : "no", (double)drop,
              with_res ? "d_res" : "d_out", err);
        pool_release(&vp);
    }
    float *once_gamma = copy(&pool, d_gamma, C), *once_bias = copy(&pool, d_bias, C);
    residual_layernorm_backward(d_sum, d_branch, d_bias, d_gamma, d_beta, stats, w, v, sum, gamma,
                                mean, rstd, N, C, p, key);
    double err = fmax(doubling_err(&pool, d_gamma, once_gamma, C),
                      doubling_err(&pool, d_bias, once_bias, C));
    CHECK(t, err < 1e-6, "residual_layernorm_backward d_gamma, d_bias accumulate (rel err %.2e)", err);

    const int BN = 64, BC = 300; /* 5 column blocks, the last one partial */
    float *x = uniform(&pool, rng, BN * BC, -2, 2), *g = uniform(&pool, rng, BN * BC, -1, 1);
    float *gr = uniform(&pool, rng, BN * BC, -1, 1), *bg = uniform(&pool, rng, BC, 0.5f, 1.5f);
    float *bm = zeros(&pool, BN), *br = zeros(&pool, BN), *y = zeros(&pool, BN * BC);
    float *bstats = zeros(&pool, 2 * BN);
    layernorm_forward(y, bm, br, x, bg, bg, BN, BC, 1e-12f);
    float *outs[2][5];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        for (int k = 0; k < 5; k++)
            outs[run][k] = zeros(&pool, k < 2 ? BN * BC : BC);
        residual_layernorm_backward(outs[run][0], outs[run][1], outs[run][2], outs[run][3],
                                    outs[run][4], bstats, g, gr, x, bg, bm, br, BN, BC, 0.1f, key);
    }
    omp_set_num_threads(2);
    int same = 1;
    for (int k = 0; k < 5; k++)
        same &= same_bits(outs[0][k], outs[1][k], k < 2 ? BN * BC : BC);
    CHECK(t, same, "residual_layernorm_backward bit-identical with 1 and 2 threads (N=%d C=%d)", BN, BC);
    pool_release(&pool);
}

/* Bit-for-bit cases of the tests below: whether all matched, how many, and the first that did not. */
typedef struct {
    int same, cases, bad_N, bad_C;
} CaseTally;

static void case_result(CaseTally *tally, int ok, int N, int C) {
    if (!ok && tally->same)
        tally->bad_N = N, tally->bad_C = C;
    tally->same &= ok;
    tally->cases++;
}

/* The rows in groups of 4 (each pass's loop shared by a group, layernorm.c) against the same rows
 * one call each (a single row: the one-row loops), bit for bit, at N = 1-9 (whole groups, the rows
 * left) and widths around the 8-lane registers' edges, with and without dropout: the forward's out,
 * sum, mean and rstd, the backward's d_sum and d_branch (its column sums add over a call's rows,
 * so they are not compared). */
static void test_row_groups(TestTally *t, Rng *rng) {
    static const int widths[] = {1, 3, 8, 12, 36, 64, 77};
    enum { MAX_N = 9, MAX_C = 77 };
    Pool pool = {0};
    const uint64_t key = hash_key(9, 8, 7);
    float *res = uniform(&pool, rng, MAX_N * MAX_C, -2, 2), *branch = uniform(&pool, rng, MAX_N * MAX_C, -1, 1);
    float *d_out = uniform(&pool, rng, MAX_N * MAX_C, -1, 1), *d_res = uniform(&pool, rng, MAX_N * MAX_C, -1, 1);
    float *gamma = uniform(&pool, rng, MAX_C, 0.5f, 1.5f), *beta = uniform(&pool, rng, MAX_C, -1, 1);
    float *bias = uniform(&pool, rng, MAX_C, -1, 1), *d_bias = zeros(&pool, MAX_C);
    float *d_gamma = zeros(&pool, MAX_C), *d_beta = zeros(&pool, MAX_C), *stats = zeros(&pool, 2 * MAX_N);
    /* [0]: the N rows in one call, [1]: one row a call */
    float *out[2], *sum[2], *mean[2], *rstd[2], *plain[2], *plain_mean[2], *plain_rstd[2], *d_sum[2], *d_branch[2];
    for (int k = 0; k < 2; k++) {
        out[k] = zeros(&pool, MAX_N * MAX_C), sum[k] = zeros(&pool, MAX_N * MAX_C);
        plain[k] = zeros(&pool, MAX_N * MAX_C);
        mean[k] = zeros(&pool, MAX_N), rstd[k] = zeros(&pool, MAX_N);
        plain_mean[k] = zeros(&pool, MAX_N), plain_rstd[k] = zeros(&pool, MAX_N);
        d_sum[k] = zeros(&pool, MAX_N * MAX_C), d_branch[k] = zeros(&pool, MAX_N * MAX_C);
    }
    CaseTally tally = {1, 0, 0, 0};
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
        for (int N = 1; N <= MAX_N; N++)
            for (int drop = 0; drop < 2; drop++) {
                const int C = widths[w];
                const float p = drop ? 0.25f : 0.0f;
                residual_layernorm_forward(out[0], sum[0], mean[0], rstd[0], res, branch, bias, gamma, beta, N, C,
                                           1e-5f, p, key);
                layernorm_forward(plain[0], plain_mean[0], plain_rstd[0], res, gamma, beta, N, C, 1e-5f);
                residual_layernorm_backward(d_sum[0], d_branch[0], d_bias, d_gamma, d_beta, stats, d_out, d_res,
                                            sum[0], gamma, mean[0], rstd[0], N, C, p, key);
                for (int n = 0; n < N; n++) { /* one row a call; its dropout keys are those of row n */
                    const size_t at = (size_t)n * C;
                    const int row_key = n;
                    residual_layernorm_forward_keyed(out[1] + at, sum[1] + at, mean[1] + n, rstd[1] + n, res + at,
                                                     branch + at, bias, gamma, beta, 1, C, 1e-5f, p, key, &row_key);
                    layernorm_forward(plain[1] + at, plain_mean[1] + n, plain_rstd[1] + n, res + at, gamma, beta, 1,
                                      C, 1e-5f);
                    residual_layernorm_backward_keyed(d_sum[1] + at, d_branch[1] + at, d_bias, d_gamma, d_beta,
                                                      stats, d_out + at, d_res + at, sum[1] + at, gamma, mean[1] + n,
                                                      rstd[1] + n, 1, C, p, key, &row_key);
                }
                const size_t n = (size_t)N * C;
                int ok = same_bits(out[0], out[1], n) && same_bits(sum[0], sum[1], n);
                ok &= same_bits(mean[0], mean[1], (size_t)N) && same_bits(rstd[0], rstd[1], (size_t)N);
                ok &= same_bits(plain[0], plain[1], n) && same_bits(plain_mean[0], plain_mean[1], (size_t)N) &&
                      same_bits(plain_rstd[0], plain_rstd[1], (size_t)N);
                ok &= same_bits(d_sum[0], d_sum[1], n) && same_bits(d_branch[0], d_branch[1], n);
                case_result(&tally, ok, N, C);
            }
    CHECK(t, tally.same, "layer norms in row groups = one row a call, bit for bit: forward out, sum, mean, rstd "
          "(residual and plain), backward d_sum, d_branch; %d cases, N 1-9, widths 1-77, with and without dropout "
          "(first difference: N %d, C %d)", tally.cases, tally.bad_N, tally.bad_C);
    pool_release(&pool);
}

/* residual_layernorm_backward's column pass on AVX-512 against the portable loops, bit for bit, in
 * every output (d_sum, d_branch, d_bias, d_gamma, d_beta), at N 1-9 and 40, widths 1-77 and 300 (two
 * column blocks at two threads), with and without d_res, d_branch and dropout. */
static void test_backward_isa(TestTally *t, Rng *rng) {
    if (!cpu_has_avx512_loops()) {
        printf("SKIP residual_layernorm_backward's AVX-512 column pass (this CPU has no AVX-512 F, BW, DQ and VL)\n");
        return;
    }
    static const int widths[] = {1, 5, 16, 36, 64, 77, 300}, rows[] = {1, 4, 9, 40};
    enum { MAX_N = 40, MAX_C = 300 };
    Pool pool = {0};
    const uint64_t key = hash_key(5, 6, 7);
    float *in = uniform(&pool, rng, MAX_N * MAX_C, -2, 2), *d_out = uniform(&pool, rng, MAX_N * MAX_C, -1, 1);
    float *d_res = uniform(&pool, rng, MAX_N * MAX_C, -1, 1), *gamma = uniform(&pool, rng, MAX_C, 0.5f, 1.5f);
    float *mean = uniform(&pool, rng, MAX_N, -0.5f, 0.5f), *rstd = uniform(&pool, rng, MAX_N, 0.5f, 2.0f);
    float *stats = zeros(&pool, 2 * MAX_N), *out[2][5];
    for (int isa = 0; isa < 2; isa++)
        for (int k = 0; k < 5; k++)
            out[isa][k] = zeros(&pool, k < 2 ? MAX_N * MAX_C : MAX_C);
    CaseTally tally = {1, 0, 0, 0};
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (int parts = 0; parts < 6; parts++) { /* d_res or not; no d_branch, d_branch, d_branch + dropout */
                const int N = rows[r], C = widths[w], with_res = parts % 2, branch = parts / 2;
                const float p = branch == 2 ? 0.3f : 0.0f;
                for (int isa = 0; isa < 2; isa++) {
                    for (int k = 0; k < 5; k++) /* the sums accumulate: from the same start */
                        memset(out[isa][k], 0, (k < 2 ? (size_t)N * C : (size_t)C) * sizeof(float));
                    residual_layernorm_backward_isa(isa, out[isa][0], branch ? out[isa][1] : NULL,
                                                    branch ? out[isa][2] : NULL, out[isa][3], out[isa][4], stats,
                                                    d_out, with_res ? d_res : NULL, in, gamma, mean, rstd, N, C, p,
                                                    key, NULL);
                }
                int ok = 1;
                for (int k = 0; k < 5; k++)
                    ok &= same_bits(out[0][k], out[1][k], k < 2 ? (size_t)N * C : (size_t)C);
                case_result(&tally, ok, N, C);
            }
    CHECK(t, tally.same, "residual_layernorm_backward's AVX-512 column pass = the portable loops, bit for bit (d_sum, "
          "d_branch, d_bias, d_gamma, d_beta): %d cases, N 1-40, widths 1-300, with and without d_res, d_branch, "
          "dropout (first difference: N %d, C %d)", tally.cases, tally.bad_N, tally.bad_C);
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
    test_residual_layernorm_backward(&t, &rng);
    test_row_groups(&t, &rng);
    test_backward_isa(&t, &rng);
    return tally_exit(&t);
}
