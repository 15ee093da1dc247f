/* layers/linear.c: linear_forward against a naive double triple loop; linear_backward's d_in,
 * dW, db against central differences of the double reference's loss sum(w . out) (d_out = w),
 * d_in prefilled with NaN (overwritten), dW and db accumulating (a second call doubles them),
 * d_in == NULL skipped; bit-identical repeated runs with 2 threads, 1 vs 2 threads within
 * rounding for the GEMM outputs; linear_backward_accumulate adds linear_backward's d_in to what
 * d_in holds and gives the same dW, db. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


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
        linear_forward(NULL, out, in, W, b, N, I, O);
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
    linear_backward(NULL, d_in, dW, db, w, in, W, N, I, O);
    LinearRef r = {N, I, O, doubles(&pool, in, N * I), doubles(&pool, W, O * I),
                   doubles(&pool, b, O), doubles(&pool, w, N * O)};
    check_grad(t, &pool, "linear d_in (prefilled NaN)", d_in, r.in, N * I, linear_loss, &r);
    check_grad(t, &pool, "linear dW", dW, r.W, O * I, linear_loss, &r);
    check_grad(t, &pool, "linear db", db, r.b, O, linear_loss, &r);
    float *dW_once = copy(&pool, dW, O * I), *db_once = copy(&pool, db, O);
    linear_backward(NULL, NULL, dW, db, w, in, W, N, I, O); /* also: d_in NULL is skipped */
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
        linear_forward(NULL, out[run], in, W, b, N, I, O);
        linear_backward(NULL, d_in[run], dW[run], db[run], d_out, in, W, N, I, O);
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

static void test_linear_accumulate(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int N = 33, I = 70, O = 45;
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -1, 1);
    float *d_out = uniform(&pool, rng, N * O, -1, 1), *prior = uniform(&pool, rng, N * I, -1, 1);
    float *d_in = nans(&pool, N * I), *dW = zeros(&pool, O * I), *db = zeros(&pool, O);
    linear_backward(NULL, d_in, dW, db, d_out, in, W, N, I, O);
    float *acc = copy(&pool, prior, N * I), *acc_dW = zeros(&pool, O * I), *acc_db = zeros(&pool, O);
    linear_backward_accumulate(NULL, acc, acc_dW, acc_db, d_out, in, W, N, I, O);
    double *expected = doubles(&pool, prior, N * I);
    for (int e = 0; e < N * I; e++)
        expected[e] += d_in[e];
    const double err = rel_err(acc, expected, N * I);
    CHECK(t, err < 1e-6 && same_bits(dW, acc_dW, O * I) && same_bits(db, acc_db, O),
          "linear_backward_accumulate: d_in += linear_backward's d_in (rel err %.2e), same dW, db", err);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240607);
    omp_set_num_threads(2);
    test_linear(&t, &rng);
    test_linear_threads(&t, &rng);
    test_linear_accumulate(&t, &rng);
    return tally_exit(&t);
}
