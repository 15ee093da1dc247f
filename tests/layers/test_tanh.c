/* layers/tanh.c: forward against tanh in double, backward (from the forward's output) against
 * central differences of sum(w . tanh(in)), d_in prefilled with NaN, in-place use. */
#include "layers/layers.h"
#include "tests/layer_testing.h"

typedef struct {
    size_t n;
    double *in, *w;
} TanhRef;

static double tanh_loss(const void *ctx) {
    const TanhRef *r = ctx;
    double loss = 0.0;
    for (size_t e = 0; e < r->n; e++)
        loss += r->w[e] * tanh(r->in[e]);
    return loss;
}

static void test_tanh(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const size_t n = 300;
    float *in = uniform(&pool, rng, n, -4, 4), *w = uniform(&pool, rng, n, -1, 1);
    in[0] = 0.0f, in[1] = -12.0f, in[2] = 12.0f;
    float *out = nans(&pool, n), *d_in = nans(&pool, n);
    tanh_forward(out, in, n);
    tanh_backward(d_in, w, out, n);
    TanhRef r = {n, doubles(&pool, in, n), doubles(&pool, w, n)};
    double *expected = pool_alloc(&pool, n, sizeof *expected);
    for (size_t e = 0; e < n; e++)
        expected[e] = tanh(r.in[e]);
    double err = rel_err(out, expected, n);
    CHECK(t, err < 1e-6, "tanh_forward matches tanh on [-12, 12] (rel err %.2e)", err);
    check_grad(t, &pool, "tanh d_in (prefilled NaN)", d_in, r.in, n, tanh_loss, &r);
    float *in_place = copy(&pool, in, n), *d_in_place = copy(&pool, w, n);
    tanh_forward(in_place, in_place, n);
    tanh_backward(d_in_place, d_in_place, in_place, n);
    CHECK(t, same_bits(in_place, out, n) && same_bits(d_in_place, d_in, n),
          "tanh forward with out == in, backward with d_in == d_out");
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240616);
    test_tanh(&t, &rng);
    return tally_exit(&t);
}
