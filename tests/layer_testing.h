/* Shared helpers of the layer tests: a pool for a test's allocations, random fills, relative
 * errors, and the central-difference gradient check against a double-precision reference. */
#pragma once
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "tests/check.h"

static const double FD_STEP = 1e-5;  /* central-difference step on the double references */
static const double GRAD_TOL = 1e-4; /* max |analytic - numeric| / max |numeric| */

/* A test's allocations, released together. */
typedef struct {
    void *blocks[64];
    int count;
} Pool;

static inline void *pool_alloc(Pool *pool, size_t count, size_t size) {
    RP_CHECK(pool->count < 64, "layer tests: Pool full");
    return pool->blocks[pool->count++] = xcalloc(count, size);
}

static inline void pool_release(Pool *pool) {
    while (pool->count)
        free(pool->blocks[--pool->count]);
}

static inline float *zeros(Pool *pool, size_t n) { return pool_alloc(pool, n, sizeof(float)); }

static inline float *uniform(Pool *pool, Rng *rng, size_t n, float lo, float hi) {
    float *x = zeros(pool, n);
    for (size_t k = 0; k < n; k++)
        x[k] = lo + (hi - lo) * rng_uniform(rng);
    return x;
}

static inline float *nans(Pool *pool, size_t n) {
    float *x = zeros(pool, n);
    for (size_t k = 0; k < n; k++)
        x[k] = NAN;
    return x;
}

static inline float *copy(Pool *pool, const float *x, size_t n) {
    return memcpy(zeros(pool, n), x, n * sizeof *x);
}

static inline double *doubles(Pool *pool, const float *x, size_t n) {
    double *y = pool_alloc(pool, n, sizeof *y);
    for (size_t k = 0; k < n; k++)
        y[k] = x[k];
    return y;
}

static inline int *ints_below(Pool *pool, Rng *rng, size_t n, int below) {
    int *x = pool_alloc(pool, n, sizeof *x);
    for (size_t k = 0; k < n; k++)
        x[k] = (int)rng_below(rng, (uint64_t)below);
    return x;
}

/* max_k |a_k - b_k| / max_k |b_k|; NaN in a gives NaN, which fails every "<" check */
static inline double rel_err(const float *a, const double *b, size_t n) {
    double err = 0.0, scale = 1e-30;
    for (size_t k = 0; k < n; k++) {
        double d = fabs(a[k] - b[k]);
        err = d > err || isnan(d) ? d : err;
        scale = fmax(scale, fabs(b[k]));
    }
    return err / scale;
}

/* the same against a float reference */
static inline double rel_err_f(const float *a, const float *b, size_t n) {
    double err = 0.0, scale = 1e-30;
    for (size_t k = 0; k < n; k++) {
        double d = fabs((double)a[k] - b[k]);
        err = d > err || isnan(d) ? d : err;
        scale = fmax(scale, fabs((double)b[k]));
    }
    return err / scale;
}

/* second call of an accumulating backward: |twice - 2 once| / |2 once| */
static inline double doubling_err(Pool *pool, const float *twice, const float *once, size_t n) {
    double *expected = doubles(pool, once, n);
    for (size_t k = 0; k < n; k++)
        expected[k] *= 2.0;
    return rel_err(twice, expected, n);
}

static inline int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* out [cols] = softmax(in) in double (the oracle of the softmax and cross-entropy tests) */
static inline void softmax_ref_row(double *out, const double *in, int cols) {
    double max = in[0], sum = 0.0;
    for (int c = 1; c < cols; c++)
        max = fmax(max, in[c]);
    for (int c = 0; c < cols; c++)
        sum += out[c] = exp(in[c] - max);
    for (int c = 0; c < cols; c++)
        out[c] /= sum;
}

/* Compares `analytic` with central differences of loss(ctx) w.r.t. param[0..n). */
typedef double (*LossFn)(const void *ctx);
static inline void check_grad(TestTally *t, Pool *pool, const char *what, const float *analytic,
                              double *param, size_t n, LossFn loss, const void *ctx) {
    double *numeric = pool_alloc(pool, n, sizeof *numeric);
    for (size_t k = 0; k < n; k++) {
        const double saved = param[k];
        param[k] = saved + FD_STEP;
        const double up = loss(ctx);
        param[k] = saved - FD_STEP;
        const double down = loss(ctx);
        param[k] = saved;
        numeric[k] = (up - down) / (2.0 * FD_STEP);
    }
    double err = rel_err(analytic, numeric, n);
    CHECK(t, err < GRAD_TOL, "%s matches finite differences (rel err %.2e)", what, err);
}
