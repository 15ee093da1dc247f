/* layers/softmax.c: softmax_row_max + softmax_row_normalize against a double reference (a row
 * offset by +100, where exp overflows without the max shift), the returned log-sum-exp, in-place
 * use, an all -inf row giving zeros and NaN rows giving NaN; exp_nonpositive and softmax_row_probs
 * (attention's); softmax_scaled_row_probs (attention's rows without bias, mask or dropout) against the
 * logits pass it replaces and, bit for bit, its AVX-512 kernel against its portable loops; the same for
 * softmax_scaled_row_backward; their 4-row forms against the one-row ones. (Its gradient is fused into the
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

/* The kernels keep the sum order and the fused multiply-adds of the portable loops as the default
 * build (x86-64-v3, -O3 -ffp-contract=fast) compiles them, 8 lanes; a build for AVX-512 (make
 * NATIVE=1 on such a CPU) may take 16 lanes and another order, and the sanitizer build (-O1, no
 * contraction: make sanitize) other vector shapes and separate multiplies and adds. Those builds
 * skip the kernels' bit-for-bit checks; make test runs them. */
#if defined(__AVX512F__)
enum { BUILD_WIDE = 1 };
#define WIDE_WHY "this build's portable loops may be 16 lanes wide, in another sum order (NATIVE=1)"
#elif defined(__SANITIZE_ADDRESS__)
enum { BUILD_WIDE = 1 };
#define WIDE_WHY "the sanitizer build compiles the portable loops at -O1 without contraction; make test checks the bits"
#else
enum { BUILD_WIDE = 0 };
#define WIDE_WHY ""
#endif

/* softmax_scaled_row_probs: the portable loops against softmax_row_probs after attention's logits
 * pass (t = scale x + 0, max), to the bit; the AVX-512 kernel against the portable loops, to the bit,
 * at every length 1-130 (whole registers, 8-element groups and every tail), for rows of logits, of
 * logits with a -inf, a +inf, a NaN, -10000 penalties, -0, huge values, and rows of -inf only; and
 * softmax_row_probs' AVX-512 kernel (given the logits and their max) against its portable loops. */
static void test_scaled_probs(TestTally *t, Rng *rng) {
    Pool pool = {0};
    enum { MAX_COLS = 130, KINDS = 7 };
    float *x = pool_alloc(&pool, MAX_COLS, sizeof *x), *ref = pool_alloc(&pool, MAX_COLS, sizeof *ref);
    float *portable = pool_alloc(&pool, MAX_COLS, sizeof *portable), *wide = pool_alloc(&pool, MAX_COLS, sizeof *wide);
    const int avx512 = __builtin_cpu_supports("avx512f");
    float *logits = pool_alloc(&pool, MAX_COLS, sizeof *logits);
    float *probs_wide = pool_alloc(&pool, MAX_COLS, sizeof *probs_wide);
    int old_same = 1, wide_same = 1, bad_cols = 0, bad_kind = 0, probs_same = 1, bad_probs_cols = 0, bad_probs_kind = 0;
    for (int cols = 1; cols <= MAX_COLS; cols++)
        for (int kind = 0; kind < KINDS; kind++) {
            const float scale = kind == 6 ? 1e30f : 0.25f + 0.01f * (float)(cols % 7);
            for (int c = 0; c < cols; c++)
                x[c] = -20.0f + 40.0f * rng_uniform(rng);
            const int at = (int)(rng_uniform(rng) * (float)cols) % cols;
            if (kind == 1)
                x[at] = -INFINITY;
            if (kind == 2)
                x[at] = INFINITY;
            if (kind == 3)
                x[at] = NAN;
            if (kind == 4)
                for (int c = 0; c < cols; c += 3)
                    x[c] -= 10000.0f, x[at] = -0.0f;
            if (kind == 5)
                for (int c = 0; c < cols; c++)
                    x[c] = c == at ? NAN : -INFINITY;
            float max = -INFINITY; /* the logits pass of attention.c, then softmax_row_probs */
            for (int c = 0; c < cols; c++) {
                ref[c] = scale * x[c] + 0.0f;
                max = ref[c] > max ? ref[c] : max;
            }
            memcpy(logits, ref, (size_t)cols * sizeof *ref);
            softmax_row_probs_isa(0, ref, ref, cols, max);
            if (avx512) { /* given the logits and their max (attention's rows with carried scores or masks) */
                softmax_row_probs_isa(1, probs_wide, logits, cols, max);
                const int same = same_bits(probs_wide, ref, (size_t)cols);
                if (!same && probs_same)
                    bad_probs_cols = cols, bad_probs_kind = kind;
                probs_same &= same;
            }
            memcpy(portable, x, (size_t)cols * sizeof *x);
            memcpy(wide, x, (size_t)cols * sizeof *x);
            softmax_scaled_row_probs_isa(0, portable, cols, scale);
            if (avx512)
                softmax_scaled_row_probs_isa(1, wide, cols, scale);
            const int same_old = same_bits(portable, ref, (size_t)cols);
            const int same_wide = !avx512 || same_bits(wide, portable, (size_t)cols);
            if ((!same_old || !same_wide) && old_same && wide_same)
                bad_cols = cols, bad_kind = kind;
            old_same &= same_old, wide_same &= same_wide;
        }
    CHECK(t, old_same, "softmax_scaled_row_probs (portable) = the logits pass + softmax_row_probs, bit for bit "
          "(first difference: %d columns, row kind %d)", bad_cols, bad_kind);
    if (!avx512 || BUILD_WIDE)
        printf("SKIP softmax_scaled_row_probs AVX-512 kernel (%s)\n", BUILD_WIDE ? WIDE_WHY : "this CPU has no AVX-512F");
    else
        CHECK(t, wide_same, "softmax_scaled_row_probs: the AVX-512 kernel = the portable loops, bit for bit, at "
              "lengths 1-130 (first difference: %d columns, row kind %d)", bad_cols, bad_kind);
    if (avx512 && !BUILD_WIDE)
        CHECK(t, probs_same, "softmax_row_probs: the AVX-512 kernel = the portable loops given the logits and their "
              "max, bit for bit, at lengths 1-130 (first difference: %d columns, row kind %d)", bad_probs_cols,
              bad_probs_kind);
    pool_release(&pool);
}

/* softmax_scaled_row_backward: the portable loops against attention's three passes it replaces
 * (dot = sum g p, g = p (g - dot), g = scale g), and the AVX-512 kernel against the portable loops,
 * bit for bit, at every length 1-130, for rows of probabilities with exact zeros and an unnormalised
 * row (a dot far from 0). */
static void test_scaled_backward(TestTally *t, Rng *rng) {
    Pool pool = {0};
    enum { MAX_COLS = 130 };
    float *p = pool_alloc(&pool, MAX_COLS, sizeof *p), *g = pool_alloc(&pool, MAX_COLS, sizeof *g);
    float *ref = pool_alloc(&pool, MAX_COLS, sizeof *ref), *portable = pool_alloc(&pool, MAX_COLS, sizeof *portable);
    float *wide = pool_alloc(&pool, MAX_COLS, sizeof *wide);
    const int avx512 = __builtin_cpu_supports("avx512f");
    int old_same = 1, wide_same = 1, bad_cols = 0, bad_kind = 0;
    for (int cols = 1; cols <= MAX_COLS; cols++)
        for (int kind = 0; kind < 2; kind++) {
            const float scale = 0.25f + 0.01f * (float)(cols % 5);
            for (int c = 0; c < cols; c++) {
                p[c] = kind == 0 && c % 5 == 2 ? 0.0f : rng_uniform(rng) * (kind == 0 ? 2.0f / (float)cols : 3.0f);
                g[c] = -4.0f + 8.0f * rng_uniform(rng);
            }
            float dot = 0.0f; /* attention.c's score_grad_rows without dropout, carry or bias */
            for (int c = 0; c < cols; c++)
                dot += g[c] * p[c];
            for (int c = 0; c < cols; c++)
                ref[c] = scale * (p[c] * (g[c] - dot));
            memcpy(portable, g, (size_t)cols * sizeof *g);
            memcpy(wide, g, (size_t)cols * sizeof *g);
            softmax_scaled_row_backward_isa(0, portable, p, cols, scale);
            if (avx512)
                softmax_scaled_row_backward_isa(1, wide, p, cols, scale);
            double worst = 0.0, size = 1.0; /* the sums' order may differ: to 1e-5 of the row's largest */
            for (int c = 0; c < cols; c++)
                worst = fmax(worst, fabs((double)portable[c] - (double)ref[c])), size = fmax(size, fabs((double)ref[c]));
            const int near_old = worst <= 1e-5 * size, same_wide = !avx512 || same_bits(wide, portable, (size_t)cols);
            if ((!near_old || !same_wide) && old_same && wide_same)
                bad_cols = cols, bad_kind = kind;
            old_same &= near_old, wide_same &= same_wide;
        }
    CHECK(t, old_same, "softmax_scaled_row_backward (portable) = scale p (g - g.p) (first difference: %d columns, "
          "row kind %d)", bad_cols, bad_kind);
    if (!avx512 || BUILD_WIDE)
        printf("SKIP softmax_scaled_row_backward AVX-512 kernel (%s)\n", BUILD_WIDE ? WIDE_WHY : "this CPU has no AVX-512F");
    else
        CHECK(t, wide_same, "softmax_scaled_row_backward: the AVX-512 kernel = the portable loops, bit for bit, at "
              "lengths 1-130 (first difference: %d columns, row kind %d)", bad_cols, bad_kind);
    pool_release(&pool);
}

/* The rows forms (4 rows at a time on AVX-512, passes interleaved): [n, cols] blocks for n = 1-9 at
 * lengths around the registers' and groups' edges, against the one-row portable loops row by row,
 * bit for bit, a block with a row of -inf only (taken one by one) included. */
static void test_scaled_rows(TestTally *t, Rng *rng) {
    static const int lengths[] = {1, 7, 8, 9, 16, 17, 31, 33, 59, 64, 122};
    enum { MAX_ROWS = 9, MAX_COLS = 122 };
    Pool pool = {0};
    float *x = pool_alloc(&pool, MAX_ROWS * MAX_COLS, sizeof *x), *p = pool_alloc(&pool, MAX_ROWS * MAX_COLS, sizeof *p);
    float *one = pool_alloc(&pool, MAX_ROWS * MAX_COLS, sizeof *one);
    float *block = pool_alloc(&pool, MAX_ROWS * MAX_COLS, sizeof *block);
    int same_fwd = 1, same_given = 1, same_bwd = 1, blocks = 0;
    for (int isa = 0; isa < 1 + !!__builtin_cpu_supports("avx512f"); isa++)
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++)
            for (int n = 1; n <= MAX_ROWS; n++) {
                const int cols = lengths[l], count = n * cols;
                for (int e = 0; e < count; e++)
                    x[e] = -10.0f + 20.0f * rng_uniform(rng), p[e] = rng_uniform(rng) * 2.0f / (float)cols;
                if (n == 6) /* row 5: -inf only, in the second group of 4 */
                    for (int c = 0; c < cols; c++)
                        x[5 * cols + c] = -INFINITY;
                memcpy(one, x, (size_t)count * sizeof *x);
                memcpy(block, x, (size_t)count * sizeof *x);
                for (int r = 0; r < n; r++)
                    softmax_scaled_row_probs_isa(isa, one + (size_t)r * cols, cols, 0.3f);
                softmax_scaled_rows_probs_isa(isa, block, n, cols, 0.3f);
                same_fwd &= same_bits(one, block, (size_t)count);
                float max[MAX_ROWS]; /* x as logits, given their maxima */
                memcpy(one, x, (size_t)count * sizeof *x);
                memcpy(block, x, (size_t)count * sizeof *x);
                for (int r = 0; r < n; r++) {
                    max[r] = softmax_row_max(x + (size_t)r * cols, cols);
                    softmax_row_probs_isa(isa, one + (size_t)r * cols, one + (size_t)r * cols, cols, max[r]);
                }
                softmax_rows_probs_isa(isa, block, n, cols, max);
                same_given &= same_bits(one, block, (size_t)count);
                memcpy(one, x, (size_t)count * sizeof *x); /* x as dL/dP for the backward */
                memcpy(block, x, (size_t)count * sizeof *x);
                for (int r = 0; r < n; r++)
                    softmax_scaled_row_backward_isa(isa, one + (size_t)r * cols, p + (size_t)r * cols, cols, 0.3f);
                softmax_scaled_rows_backward_isa(isa, block, p, n, cols, 0.3f);
                same_bwd &= same_bits(one, block, (size_t)count);
                blocks++;
            }
    CHECK(t, same_fwd && same_given && same_bwd, "softmax_scaled_rows_probs, softmax_rows_probs and "
          "_rows_backward: %d blocks of 1-9 rows (lengths 1-122, a row of -inf) = the one-row forms row by row, bit "
          "for bit (forward %s, given the maxima %s, backward %s)", blocks, same_fwd ? "same" : "DIFFERENT",
          same_given ? "same" : "DIFFERENT", same_bwd ? "same" : "DIFFERENT");
    pool_release(&pool);
}

/* softmax_carried_rows_backward (residual attention's rows): against the formula in double (t = p (g -
 * sum g p), dc += cs t, g = scale dc) within 1e-5, and the AVX-512 kernels (4 rows, then one) against the
 * portable loops, bit for bit, in g and dc, at every length 1-130 and 1-9 rows. */
static void test_carried_backward(TestTally *t, Rng *rng) {
    enum { MAX_ROWS = 9, MAX_COLS = 130, MAX = MAX_ROWS * MAX_COLS };
    Pool pool = {0};
    float *g = pool_alloc(&pool, MAX, sizeof *g), *p = pool_alloc(&pool, MAX, sizeof *p);
    float *dc = pool_alloc(&pool, MAX, sizeof *dc), *g0 = pool_alloc(&pool, MAX, sizeof *g0);
    float *dc0 = pool_alloc(&pool, MAX, sizeof *dc0), *g1 = pool_alloc(&pool, MAX, sizeof *g1);
    float *dc1 = pool_alloc(&pool, MAX, sizeof *dc1);
    const int avx512 = __builtin_cpu_supports("avx512f") && !BUILD_WIDE;
    const float scale = 0.25f, carried_scale = 0.5f;
    double worst = 0.0;
    int same = 1, bad_cols = 0, bad_rows = 0;
    for (int cols = 1; cols <= MAX_COLS; cols++)
        for (int n = 1; n <= MAX_ROWS; n += (n < 5 ? 1 : 4)) {
            const int count = n * cols;
            for (int e = 0; e < count; e++)
                g[e] = -1.0f + 2.0f * rng_uniform(rng), p[e] = rng_uniform(rng) * 2.0f / (float)cols,
                dc[e] = -1.0f + 2.0f * rng_uniform(rng);
            memcpy(g0, g, (size_t)count * sizeof *g), memcpy(dc0, dc, (size_t)count * sizeof *dc);
            softmax_carried_rows_backward_isa(0, g0, p, dc0, n, cols, scale, carried_scale);
            for (int r = 0; r < n; r++) {
                const size_t at = (size_t)r * cols;
                double dot = 0.0;
                for (int c = 0; c < cols; c++)
                    dot += (double)g[at + c] * p[at + c];
                for (int c = 0; c < cols; c++) {
                    const double want_dc = dc[at + c] + (double)carried_scale * p[at + c] * (g[at + c] - dot);
                    worst = fmax(worst, fabs(dc0[at + c] - want_dc) + fabs(g0[at + c] - scale * want_dc));
                }
            }
            if (!avx512)
                continue;
            memcpy(g1, g, (size_t)count * sizeof *g), memcpy(dc1, dc, (size_t)count * sizeof *dc);
            softmax_carried_rows_backward_isa(1, g1, p, dc1, n, cols, scale, carried_scale);
            const int row_same = same_bits(g1, g0, (size_t)count) && same_bits(dc1, dc0, (size_t)count);
            if (!row_same && same)
                bad_cols = cols, bad_rows = n;
            same &= row_same;
        }
    CHECK(t, worst < 1e-5, "softmax_carried_rows_backward = dc + cs p (g - g.p), g = scale dc (worst %.2e)", worst);
    if (!avx512)
        printf("SKIP softmax_carried_rows_backward AVX-512 kernels (%s)\n",
               BUILD_WIDE ? WIDE_WHY : "this CPU has no AVX-512F");
    else
        CHECK(t, same, "softmax_carried_rows_backward: the AVX-512 kernels = the portable loops, bit for bit, at "
              "lengths 1-130, 1-9 rows (first difference: %d columns, %d rows)", bad_cols, bad_rows);
    pool_release(&pool);
}

/* The exp's edges on AVX-512 (softmax_avx512.c's exp16, which leaves out exp_nonpositive's clamp and
 * tests x >= -87.34 for |x| <= 87.34): every float logit from -87.3 to -87.4 (the last kept value
 * 0xc2aeac50 and its neighbours) and from -103.9 to -104 (2^-149 and below), and every 97th float
 * from -0 to -200, in rows that hold a 0 (the max) and NaN: softmax_row_probs' AVX-512 kernel against
 * its portable loops, bit for bit. */
static void test_exp_edges(TestTally *t) {
    if (!__builtin_cpu_supports("avx512f") || BUILD_WIDE) {
        printf("SKIP the exp's edges on AVX-512 (%s)\n", BUILD_WIDE ? WIDE_WHY : "this CPU has no AVX-512F");
        return;
    }
    enum { COLS = 37 };
    float in[COLS], portable[COLS], wide[COLS];
    long rows = 0, differ = 0;
    static const float ranges[][3] = {{-87.3f, -87.4f, 1}, {-103.9f, -104.0f, 1}, {-0.0f, -200.0f, 97}};
    for (int range = 0; range < 3; range++) {
        uint32_t bits, last;
        memcpy(&bits, &ranges[range][0], sizeof bits);
        memcpy(&last, &ranges[range][1], sizeof last);
        const uint32_t stride = (uint32_t)ranges[range][2];
        while (bits <= last) {
            in[0] = 0.0f, in[1] = rows % 2 ? NAN : -1.0f; /* every other row with a NaN */
            for (int c = 2; c < COLS && bits <= last; c++, bits += stride)
                memcpy(&in[c], &bits, sizeof bits);
            softmax_row_probs_isa(0, portable, in, COLS, 0.0f);
            softmax_row_probs_isa(1, wide, in, COLS, 0.0f);
            differ += !same_bits(portable, wide, COLS);
            rows++;
        }
    }
    CHECK(t, differ == 0, "the exp's edges: %ld rows of logits down to the smallest kept (-87.34) and past 2^-149, and "
          "-0 to -200, with and without a NaN: softmax_row_probs' AVX-512 kernel = its portable loops, bit for bit "
          "(%ld rows differ)", rows, differ);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240615);
    test_softmax(&t, &rng);
    test_exp_and_probs(&t, &rng);
    test_scaled_probs(&t, &rng);
    test_exp_edges(&t);
    test_scaled_backward(&t, &rng);
    test_scaled_rows(&t, &rng);
    test_carried_backward(&t, &rng);
    return tally_exit(&t);
}
