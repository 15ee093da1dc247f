/* layers/gelu.c: forward against the erf form in double on [-10, 10], backward against central
 * differences of that reference weighted by w (elementwise, so one difference per element),
 * d_in prefilled with NaN, in-place forward and backward, bit-identical results with 1 and 2
 * threads over several work blocks. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


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

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240608);
    omp_set_num_threads(2);
    test_gelu(&t, &rng);
    return tally_exit(&t);
}
