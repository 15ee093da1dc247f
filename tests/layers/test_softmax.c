/* layers/softmax.c: softmax_row_max + softmax_row_normalize against a double reference (a row
 * offset by +100, where exp overflows without the max shift), the returned log-sum-exp, in-place
 * use, an all -inf row giving zeros and NaN rows giving NaN; exp_nonpositive and softmax_row_probs
 * (attention's). (Its gradient is fused into the
 * backward of its callers and checked there: test_crossentropy.c, test_attention.c.) */
#include "layers/layers.h"
#include "tests/layer_testing.h"

static void test_softmax(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int rows = 5, cols = 7, n = rows * cols;
    float *in = uniform(&pool, rng, n, -3, 3), *out = nans(&pool, n), *lse = nans(&pool, rows);
    for (int c = 0; c < cols; c++)
        in[2 * cols + c] += 100.0f; /* exp overflows without the max shift */
    double *expected = pool_alloc(&pool, n, sizeof *expected);
    double *expected_lse = pool_alloc(&pool, rows, sizeof *expected_lse);
    for (int r = 0; r < rows; r++) {
        const float *x = in + r * cols;
        lse[r] = softmax_row_normalize(out + r * cols, x, cols, softmax_row_max(x, cols));
        double *dx = doubles(&pool, x, cols), sum = 0.0, max = dx[0];
        softmax_ref_row(expected + r * cols, dx, cols);
        for (int c = 0; c < cols; c++)
            max = fmax(max, dx[c]);
        for (int c = 0; c < cols; c++)
            sum += exp(dx[c] - max);
        expected_lse[r] = max + log(sum);
    }
    double err = rel_err(out, expected, n), err_lse = rel_err(lse, expected_lse, rows);
    CHECK(t, err < 1e-6 && err_lse < 1e-6,
          "softmax_row_normalize matches (a row offset by +100 included; rel err %.2e, "
          "log-sum-exp %.2e)", err, err_lse);
    float *in_place = copy(&pool, in, n);
    for (int r = 0; r < rows; r++) {
        float *x = in_place + r * cols;
        softmax_row_normalize(x, x, cols, softmax_row_max(x, cols));
    }
    CHECK(t, same_bits(in_place, out, n), "softmax_row_normalize with out == in");
    for (int c = 0; c < cols; c++)
        in_place[c] = -INFINITY;
    float l = softmax_row_normalize(in_place, in_place, cols, softmax_row_max(in_place, cols));
    int all_zero = l == -INFINITY;
    for (int c = 0; c < cols; c++)
        all_zero &= in_place[c] == 0.0f;
    CHECK(t, all_zero, "softmax of an all -inf row is all zeros (log-sum-exp -inf)");
    /* NaN is never masking: the max skips NaN, so these rows reach the all -inf branch too. */
    for (int kind = 0; kind < 2; kind++) {
        for (int c = 0; c < cols; c++)
            in_place[c] = kind == 0 || c == 3 ? NAN : -INFINITY;
        l = softmax_row_normalize(in_place, in_place, cols, softmax_row_max(in_place, cols));
        int all_nan = isnan(l);
        for (int c = 0; c < cols; c++)
            all_nan &= isnan(in_place[c]);
        CHECK(t, all_nan, "softmax of a row of %s is NaN, not the zeros of a masked row",
              kind == 0 ? "NaN" : "-inf and one NaN");
    }
    pool_release(&pool);
}

/* exp_nonpositive against exp in double over [ln 2^-126, 0] (2^20 points spread over it, and every
 * float of [-0.75, -0.25]): relative error at most 4 ulp of 1 (2^-21); below ln 2^-126 and at -inf
 * exactly +0, NaN NaN. Then softmax_row_probs as softmax_row_normalize: the same rows to 1e-6,
 * in place, with -10000 masking penalties (exactly 0), an all -inf row (zeros) and a NaN row (NaN). */
static void test_exp_and_probs(TestTally *t, Rng *rng) {
    double worst = 0.0, worst_x = 0.0;
    for (int i = 0; i <= (1 << 20); i++) {
        const float x = -87.3365f * (float)i / (float)(1 << 20);
        const double want = exp((double)x), err = fabs((double)exp_nonpositive(x) - want) / want;
        if (err > worst)
            worst = err, worst_x = x;
    }
    for (float x = -0.75f; x < -0.25f; x = nextafterf(x, 0.0f)) { /* n = -1 and 0, r near +-ln2/2 */
        const double want = exp((double)x), err = fabs((double)exp_nonpositive(x) - want) / want;
        if (err > worst)
            worst = err, worst_x = x;
    }
    CHECK(t, worst <= 0x1p-21, "exp_nonpositive within 4 ulp of 1 over [ln 2^-126, 0] (worst %.2e at %g)", worst,
          worst_x);
    CHECK(t, exp_nonpositive(0.0f) == 1.0f && exp_nonpositive(-87.34f) == 0.0f && exp_nonpositive(-10000.0f) == 0.0f &&
                 exp_nonpositive(-INFINITY) == 0.0f && !signbit(exp_nonpositive(-INFINITY)) &&
                 isnan(exp_nonpositive(NAN)),
          "exp_nonpositive: e^0 = 1, +0 below ln 2^-126 and at -inf, NaN for NaN");

    Pool pool = {0};
    const int rows = 6, cols = 45, n = rows * cols;
    float *in = uniform(&pool, rng, n, -8, 8), *out = nans(&pool, n), *ref = nans(&pool, n);
    for (int c = 0; c < cols; c += 4)
        in[3 * cols + c] = in[3 * cols + c] - 10000.0f; /* masked keys */
    double *expected = pool_alloc(&pool, n, sizeof *expected);
    for (int r = 0; r < rows; r++) {
        const float *x = in + r * cols;
        softmax_row_probs(out + r * cols, x, cols, softmax_row_max(x, cols));
        softmax_row_normalize(ref + r * cols, x, cols, softmax_row_max(x, cols));
        softmax_ref_row(expected + r * cols, doubles(&pool, x, cols), cols);
    }
    int masked_zero = 1;
    for (int c = 0; c < cols; c += 4)
        masked_zero &= out[3 * cols + c] == 0.0f;
    const double err = rel_err(out, expected, n), err_ref = rel_err_f(out, ref, n);
    CHECK(t, err < 1e-6 && err_ref < 1e-6 && masked_zero,
          "softmax_row_probs matches the double softmax (rel err %.2e) and softmax_row_normalize (%.2e), "
          "masked keys exactly 0", err, err_ref);
    float *in_place = copy(&pool, in, n);
    for (int r = 0; r < rows; r++)
        softmax_row_probs(in_place + r * cols, in_place + r * cols, cols, softmax_row_max(in_place + r * cols, cols));
    CHECK(t, same_bits(in_place, out, n), "softmax_row_probs with out == in");
    int zeros = 1, all_nan = 1;
    for (int c = 0; c < cols; c++)
        in_place[c] = -INFINITY, in_place[cols + c] = c == 5 ? NAN : -INFINITY;
    softmax_row_probs(in_place, in_place, cols, softmax_row_max(in_place, cols));
    softmax_row_probs(in_place + cols, in_place + cols, cols, softmax_row_max(in_place + cols, cols));
    for (int c = 0; c < cols; c++)
        zeros &= in_place[c] == 0.0f, all_nan &= isnan(in_place[cols + c]);
    CHECK(t, zeros && all_nan, "softmax_row_probs: an all -inf row gives zeros, a row of -inf and a NaN gives NaN");
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240615);
    test_softmax(&t, &rng);
    test_exp_and_probs(&t, &rng);
    return tally_exit(&t);
}
