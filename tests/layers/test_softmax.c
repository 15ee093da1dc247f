/* layers/softmax.c: softmax_row_max + softmax_row_normalize against a double reference (a row
 * offset by +100, where exp overflows without the max shift), the returned log-sum-exp, in-place
 * use, an all -inf row giving zeros and NaN rows giving NaN. (Its gradient is fused into the
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

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240615);
    test_softmax(&t, &rng);
    return tally_exit(&t);
}
