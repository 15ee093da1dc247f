/* layers/gelu.c: forward against the erf form in double on [-10, 10], backward against central
 * differences of that reference weighted by w (elementwise, so one difference per element),
 * d_in prefilled with NaN, in-place forward and backward, bit-identical results with 1 and 2
 * threads over several work blocks. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_slope_ref(double x) {
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

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

/* linear_gelu_forward + gelu_bias_backward (+ linear_backward with db = NULL): the feed-forward
 * input against a double reference, act = gelu(in W^T + b) and slope = gelu'(in W^T + b); d_in,
 * dW, db against central differences of sum(w . act); the fused ops equal the unfused
 * composition (linear_forward, gelu_forward, gelu_backward, linear_backward's db) up to rounding;
 * db accumulates; db and d_pre bit-identical with 1 and 2 threads; the forward-only call (slope
 * NULL) gives act bit-identical to the one keeping the slope, at a width with a vector remainder
 * and over many rows with 1 and 2 threads. */
typedef struct {
    int N, I, O;
    double *in, *W, *b, *w;
} LinearGeluRef;

static double linear_gelu_loss(const void *ctx) {
    const LinearGeluRef *r = ctx;
    double loss = 0.0;
    for (int n = 0; n < r->N; n++)
        for (int o = 0; o < r->O; o++) {
            double pre = r->b[o];
            for (int c = 0; c < r->I; c++)
                pre += r->in[n * r->I + c] * r->W[o * r->I + c];
            loss += r->w[n * r->O + o] * gelu_ref(pre);
        }
    return loss;
}

static void test_linear_gelu(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 9, I = 6, O = 70; /* two column blocks of the bias gradient */
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -1, 1);
    float *b = uniform(&pool, rng, O, -1, 1), *w = uniform(&pool, rng, N * O, -1, 1);
    float *slope = nans(&pool, N * O), *act = nans(&pool, N * O);
    linear_gelu_forward(NULL, slope, act, in, W, b, N, I, O);
    LinearGeluRef r = {N, I, O, doubles(&pool, in, N * I), doubles(&pool, W, O * I),
                       doubles(&pool, b, O), doubles(&pool, w, N * O)};
    double *expected = pool_alloc(&pool, N * O, sizeof *expected);
    double *expected_slope = pool_alloc(&pool, N * O, sizeof *expected_slope);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double x = r.b[o];
            for (int c = 0; c < I; c++)
                x += r.in[n * I + c] * r.W[o * I + c];
            expected[n * O + o] = gelu_ref(x);
            expected_slope[n * O + o] = gelu_slope_ref(x);
        }
    double err = rel_err(act, expected, N * O);
    CHECK(t, err < 1e-5, "linear_gelu_forward matches gelu(in W^T + b) (rel err %.2e)", err);
    err = rel_err(slope, expected_slope, N * O);
    CHECK(t, err < 1e-5, "linear_gelu_forward slope matches gelu'(in W^T + b) (rel err %.2e)", err);
    float *act_only = nans(&pool, N * O);
    linear_gelu_forward(NULL, NULL, act_only, in, W, b, N, I, O);
    CHECK(t, same_bits(act_only, act, N * O),
          "linear_gelu_forward without a slope (forward only): act bit-identical (%dx%d)", N, O);
    float *d_pre = copy(&pool, w, N * O), *db = zeros(&pool, O), *dW = zeros(&pool, O * I);
    float *d_in = nans(&pool, N * I);
    gelu_bias_backward(d_pre, db, d_pre, slope, N, O); /* in place, as the encoder layer calls it */
    linear_backward(NULL, d_in, dW, NULL, d_pre, in, W, N, I, O);
    check_grad(t, &pool, "linear_gelu d_in", d_in, r.in, N * I, linear_gelu_loss, &r);
    check_grad(t, &pool, "linear_gelu dW", dW, r.W, O * I, linear_gelu_loss, &r);
    check_grad(t, &pool, "gelu_bias_backward db", db, r.b, O, linear_gelu_loss, &r);

    /* the unfused composition: pre = linear_forward, gelu_forward, gelu_backward(pre), db pass */
    float *pre = nans(&pool, N * O), *act_unfused = nans(&pool, N * O);
    float *d_pre_unfused = nans(&pool, N * O), *db_unfused = zeros(&pool, O);
    float *dW_unused = zeros(&pool, O * I);
    linear_forward(NULL, pre, in, W, b, N, I, O);
    gelu_forward(act_unfused, pre, N * O);
    gelu_backward(d_pre_unfused, w, pre, N * O);
    linear_backward(NULL, NULL, dW_unused, db_unfused, d_pre_unfused, in, W, N, I, O);
    err = fmax(rel_err(act, doubles(&pool, act_unfused, N * O), N * O),
               fmax(rel_err(d_pre, doubles(&pool, d_pre_unfused, N * O), N * O),
                    rel_err(db, doubles(&pool, db_unfused, O), O)));
    CHECK(t, err < 1e-5, "linear_gelu_forward + gelu_bias_backward = linear, gelu forward and backward, "
          "bias sum (rel err %.2e)", err);
    float *db_once = copy(&pool, db, O), *scratch = copy(&pool, w, N * O);
    gelu_bias_backward(scratch, db, scratch, slope, N, O);
    err = doubling_err(&pool, db, db_once, O);
    CHECK(t, err < 1e-6, "gelu_bias_backward db accumulates (rel err %.2e)", err);

    const int BN = 64, BO = 300;
    float *x = uniform(&pool, rng, BN * BO, -0.2f, 1.2f), *g = uniform(&pool, rng, BN * BO, -1, 1);
    float *dx[2], *dbias[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        dx[run] = zeros(&pool, BN * BO), dbias[run] = zeros(&pool, BO);
        gelu_bias_backward(dx[run], dbias[run], g, x, BN, BO);
    }
    CHECK(t, same_bits(dx[0], dx[1], BN * BO) && same_bits(dbias[0], dbias[1], BO),
          "gelu_bias_backward bit-identical with 1 and 2 threads (%dx%d)", BN, BO);

    /* forward only at the feed-forward's shape class: the same act bits, with any thread count */
    const int FN = 96, FI = 32, FO = 1030;
    float *f_in = uniform(&pool, rng, FN * FI, -1, 1), *f_W = uniform(&pool, rng, FO * FI, -0.5f, 0.5f);
    float *f_b = uniform(&pool, rng, FO, -1, 1), *f_slope = nans(&pool, FN * FO);
    float *f_act = nans(&pool, FN * FO), *f_only[2];
    linear_gelu_forward(NULL, f_slope, f_act, f_in, f_W, f_b, FN, FI, FO);
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        f_only[run] = nans(&pool, FN * FO);
        linear_gelu_forward(NULL, NULL, f_only[run], f_in, f_W, f_b, FN, FI, FO);
    }
    CHECK(t, same_bits(f_only[0], f_act, FN * FO) && same_bits(f_only[1], f_act, FN * FO),
          "linear_gelu_forward forward only: act bit-identical to the training forward with 1 and 2 "
          "threads (%dx%d)", FN, FO);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240608);
    omp_set_num_threads(2);
    test_gelu(&t, &rng);
    test_linear_gelu(&t, &rng);
    return tally_exit(&t);
}
