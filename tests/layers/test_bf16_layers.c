/* The layers' bf16 path (layers/linear.c, gelu.c, mlm_head.c through core/gemm.h) against the
 * emulation: with the emulated backend each layer equals its formula written with
 * gemm_bf16_reference bit for bit (the same operands rounded: the input, the weight through the
 * weights' bf16 copy, d_out staged once for both backward products), fp32 parts (bias sums) keep
 * their bits; the variants with a bf16 input or output (linear_*_bf16, linear_gelu_forward_bf16,
 * gelu_bias_backward_bf16, linear_forward_to_bf16) give the bits of their fp32 twins fed or followed by the rounding;
 * with oneDNN (skipped, saying so, without avx512_bf16/amx_bf16) each output is within the fp32
 * accumulation bound of the emulation (one product deep: 1e-5 of its scale; the head, several
 * products deep: 2e-3). The fused linear + GELU matches linear + gelu_forward in bf16 too. */
#include <math.h>

#include "layers/encoder.h"
#include "layers/layers.h"
#include "tests/layer_testing.h"

enum { N = 48, I = 96, O = 80, M = 12, H = 64, V = 200 };

/* A bf16 context with the weights block W [count] and its bf16 copy, as activations_create sets
 * the parameters'. */
static Gemm *context(Pool *pool, GemmBackend backend, const float *W, size_t count) {
    Gemm *g = gemm_create(PRECISION_BF16, backend, (size_t)M * V + N * I, (size_t)N * I + M * V);
    bf16 *copy16 = pool_alloc(pool, count, sizeof(bf16));
    bf16_convert_floats(copy16, W, count);
    gemm_set_weights(g, W, count, copy16);
    return g;
}

static bf16 *to_bf16(Pool *pool, const float *x, size_t n) {
    bf16 *out = pool_alloc(pool, n, sizeof(bf16));
    bf16_convert_floats(out, x, n);
    return out;
}

static int same_bf16(const bf16 *a, const bf16 *b, size_t n) { return !memcmp(a, b, n * sizeof(bf16)); }

/* The bf16-input and bf16-output variants = their fp32 twins around the rounding, bit for bit. */
static void test_bf16_variants(TestTally *t, Rng *rng) {
    Pool pool = {0};
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -0.3f, 0.3f);
    float *b = uniform(&pool, rng, O, -1, 1), *d_out = uniform(&pool, rng, N * O, -1, 1);
    float *acc0 = uniform(&pool, rng, N * I, -1, 1);
    Gemm *g = context(&pool, GEMM_BF16_EMULATED, W, O * I);
    bf16 *in16 = to_bf16(&pool, in, N * I), *d_out16 = to_bf16(&pool, d_out, N * O);
    float *out = nans(&pool, N * O), *out2 = nans(&pool, N * O);
    linear_forward(g, out, in, W, b, N, I, O);
    linear_forward_bf16(g, out2, in16, W, b, N, I, O);
    CHECK(t, same_bits(out, out2, N * O), "linear_forward_bf16(bf16(in)) = linear_forward(in) in bf16, bit for bit");
    bf16 *out16 = pool_alloc(&pool, N * O, sizeof(bf16));
    linear_forward_to_bf16(g, nans(&pool, N * O), out16, in, W, b, N, I, O);
    CHECK(t, same_bf16(out16, to_bf16(&pool, out, N * O), N * O),
          "linear_forward_to_bf16 = bf16(linear_forward(in)) in bf16, bit for bit");
    float *d_in = nans(&pool, N * I), *dW = zeros(&pool, O * I), *db = zeros(&pool, O);
    float *d_in2 = nans(&pool, N * I), *dW2 = zeros(&pool, O * I), *db2 = zeros(&pool, O);
    linear_backward(g, d_in, dW, db, d_out, in, W, N, I, O);
    linear_backward_bf16(g, d_in2, dW2, db2, d_out, in16, W, N, I, O);
    CHECK(t, same_bits(d_in, d_in2, N * I) && same_bits(dW, dW2, O * I) && same_bits(db, db2, O),
          "linear_backward_bf16(in16) = linear_backward(in) in bf16: d_in, dW, db bit for bit");
    /* consuming d_out: db from its fp32 values, then the same products on bf16(d_out), which it
     * leaves in the first half of each row */
    float *d_in3 = nans(&pool, N * I), *dW3 = zeros(&pool, O * I), *db3 = zeros(&pool, O);
    float *consumed = copy(&pool, d_out, N * O);
    linear_backward_consuming(g, d_in3, dW3, db3, consumed, in, W, N, I, O);
    bf16 *rows16 = pool_alloc(&pool, N * O, sizeof(bf16));
    for (int n = 0; n < N; n++)
        memcpy(rows16 + (size_t)n * O, consumed + (size_t)n * O, O * sizeof(bf16));
    CHECK(t, same_bits(d_in, d_in3, N * I) && same_bits(dW, dW3, O * I) && same_bits(db, db3, O) &&
          same_bf16(rows16, d_out16, N * O), "linear_backward_consuming = linear_backward in bf16 (d_in, dW, db bit "
          "for bit), each row of d_out left as its bf16 form in place");
    float *d_in4 = nans(&pool, N * I), *dW4 = zeros(&pool, O * I), *db4 = zeros(&pool, O);
    float *d_in5 = nans(&pool, N * I), *dW5 = zeros(&pool, O * I), *db5 = zeros(&pool, O);
    consumed = copy(&pool, d_out, N * O);
    linear_backward(NULL, d_in4, dW4, db4, d_out, in, W, N, I, O);
    linear_backward_consuming(NULL, d_in5, dW5, db5, consumed, in, W, N, I, O);
    CHECK(t, same_bits(d_in4, d_in5, N * I) && same_bits(dW4, dW5, O * I) && same_bits(db4, db5, O) &&
          same_bits(consumed, d_out, N * O), "linear_backward_consuming = linear_backward in fp32, d_out untouched");
    float *acc = copy(&pool, acc0, N * I), *acc2 = copy(&pool, acc0, N * I);
    float *dWa = zeros(&pool, O * I), *dWa2 = zeros(&pool, O * I);
    linear_backward_accumulate(g, acc, dWa, NULL, d_out, in, W, N, I, O);
    linear_backward_from_bf16(g, acc2, 1, dWa2, d_out16, in, W, N, I, O);
    linear_backward_from_bf16(g, d_in2, 0, dW2, d_out16, in, W, N, I, O);
    CHECK(t, same_bits(acc, acc2, N * I) && same_bits(dWa, dWa2, O * I) && same_bits(d_in, d_in2, N * I),
          "linear_backward_from_bf16(bf16(d_out)) = linear_backward(_accumulate)(d_out) in bf16, bit for bit");
    /* GELU: act16 = bf16(act), slope16 = bf16(slope); forward only the same act16 */
    float *slope = nans(&pool, N * O), *act = nans(&pool, N * O);
    bf16 *act16 = pool_alloc(&pool, N * O, sizeof(bf16)), *act16_only = pool_alloc(&pool, N * O, sizeof(bf16));
    bf16 *slope16 = pool_alloc(&pool, N * O, sizeof(bf16));
    linear_gelu_forward(g, slope, act, in, W, b, N, I, O);
    linear_gelu_forward_bf16(g, nans(&pool, N * O), slope16, act16, in, W, b, N, I, O);
    CHECK(t, same_bf16(act16, to_bf16(&pool, act, N * O), N * O) && same_bf16(slope16, to_bf16(&pool, slope, N * O),
          N * O), "linear_gelu_forward_bf16: act16, slope16 = bf16(linear_gelu_forward's act, slope), bit for bit");
    linear_gelu_forward_bf16(g, nans(&pool, N * O), NULL, act16_only, in, W, b, N, I, O);
    CHECK(t, same_bf16(act16, act16_only, N * O), "linear_gelu_forward_bf16 forward only: the same act16 bits");
    /* backward from the rounded slope: the fp32 twin fed bf16(slope) */
    float *slope_rounded = nans(&pool, N * O);
    for (int e = 0; e < N * O; e++)
        slope_rounded[e] = bf16_to_float(slope16[e]);
    float *d_pre = copy(&pool, d_out, N * O), *db_pre = zeros(&pool, O), *db_pre16 = zeros(&pool, O);
    bf16 *d_pre16 = pool_alloc(&pool, N * O, sizeof(bf16));
    gelu_bias_backward(d_pre, db_pre, d_pre, slope_rounded, N, O);
    gelu_bias_backward_bf16(d_pre16, db_pre16, d_out, slope16, N, O);
    CHECK(t, same_bf16(d_pre16, to_bf16(&pool, d_pre, N * O), N * O) && same_bits(db_pre, db_pre16, O),
          "gelu_bias_backward_bf16(slope16): d_pre16 = bf16(gelu_bias_backward's d_pre from bf16(slope)), db bit for "
          "bit (fp32 sum)");
    gemm_free(g);
    pool_release(&pool);
}

typedef struct {
    float *out, *d_in, *d_in_acc, *dW, *db;
} LinearRun;

static LinearRun run_linear(Pool *pool, Gemm *g, const float *in, const float *W, const float *b, const float *d_out,
                            const float *acc0) {
    LinearRun r = {nans(pool, N * O), nans(pool, N * I), copy(pool, acc0, N * I), zeros(pool, O * I), zeros(pool, O)};
    linear_forward(g, r.out, in, W, b, N, I, O);
    linear_backward(g, r.d_in, r.dW, r.db, d_out, in, W, N, I, O);
    float *dW2 = zeros(pool, O * I), *db2 = zeros(pool, O);
    linear_backward_accumulate(g, r.d_in_acc, dW2, db2, d_out, in, W, N, I, O);
    return r;
}

static void test_linear(TestTally *t, Rng *rng, int hardware) {
    Pool pool = {0};
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -1, 1);
    float *b = uniform(&pool, rng, O, -1, 1), *d_out = uniform(&pool, rng, N * O, -1, 1);
    float *acc0 = uniform(&pool, rng, N * I, -1, 1);
    Gemm *emulated = context(&pool, GEMM_BF16_EMULATED, W, O * I);
    LinearRun e = run_linear(&pool, emulated, in, W, b, d_out, acc0), f = run_linear(&pool, NULL, in, W, b, d_out, acc0);
    /* the formulas with the reference product */
    float *out = nans(&pool, N * O), *d_in = zeros(&pool, N * I), *d_acc = copy(&pool, acc0, N * I);
    float *dW = zeros(&pool, O * I);
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * O, b, sizeof(float) * O);
    gemm_bf16_reference(GEMM_N, GEMM_T, N, O, I, 1.0f, in, I, W, I, 1.0f, out, O);
    gemm_bf16_reference(GEMM_N, GEMM_N, N, I, O, 1.0f, d_out, O, W, I, 0.0f, d_in, I);
    gemm_bf16_reference(GEMM_N, GEMM_N, N, I, O, 1.0f, d_out, O, W, I, 1.0f, d_acc, I);
    gemm_bf16_reference(GEMM_T, GEMM_N, O, I, N, 1.0f, d_out, O, in, I, 1.0f, dW, I);
    CHECK(t, same_bits(e.out, out, N * O), "linear_forward bf16 (emulated) = b + bf16(in) bf16(W)^T, bit for bit");
    CHECK(t, same_bits(e.d_in, d_in, N * I) && same_bits(e.d_in_acc, d_acc, N * I),
          "linear_backward(_accumulate) bf16 (emulated) d_in = (d_in +) bf16(d_out) bf16(W), bit for bit");
    CHECK(t, same_bits(e.dW, dW, O * I), "linear_backward bf16 (emulated) dW += bf16(d_out)^T bf16(in), bit for bit");
    CHECK(t, same_bits(e.db, f.db, O), "linear_backward bf16: db is the fp32 column sum (the fp32 path's bits)");
    double err = rel_err_f(e.out, f.out, N * O);
    CHECK(t, err > 1e-4 && err < 2e-2, "linear_forward bf16 differs from fp32 by bf16 rounding (%.2e of scale)", err);
    if (!hardware) {
        printf("SKIP linear oneDNN: skipped: no avx512_bf16 on this CPU\n");
    } else {
        Gemm *onednn = context(&pool, GEMM_BF16_ONEDNN, W, O * I);
        LinearRun d = run_linear(&pool, onednn, in, W, b, d_out, acc0);
        err = fmax(fmax(rel_err_f(d.out, e.out, N * O), rel_err_f(d.d_in, e.d_in, N * I)),
                   fmax(rel_err_f(d.d_in_acc, e.d_in_acc, N * I), rel_err_f(d.dW, e.dW, O * I)));
        CHECK(t, err < 1e-5 && same_bits(d.db, e.db, O),
              "linear forward, backward, accumulate: oneDNN = emulation to fp32 accumulation (%.2e of scale)", err);
        gemm_free(onednn);
    }
    gemm_free(emulated);
    pool_release(&pool);
}

static void test_linear_gelu(TestTally *t, Rng *rng, int hardware) {
    Pool pool = {0};
    float *in = uniform(&pool, rng, N * I, -1, 1), *W = uniform(&pool, rng, O * I, -0.3f, 0.3f);
    float *b = uniform(&pool, rng, O, -1, 1);
    Gemm *emulated = context(&pool, GEMM_BF16_EMULATED, W, O * I);
    float *slope = nans(&pool, N * O), *act = nans(&pool, N * O), *pre = nans(&pool, N * O), *act2 = nans(&pool, N * O);
    linear_gelu_forward(emulated, slope, act, in, W, b, N, I, O);
    linear_forward(emulated, pre, in, W, b, N, I, O);
    gelu_forward(act2, pre, (size_t)N * O);
    double err = rel_err_f(act, act2, N * O);
    CHECK(t, err < 1e-6, "linear_gelu_forward bf16 (emulated) = gelu(linear_forward bf16) (%.2e of scale)", err);
    if (!hardware) {
        printf("SKIP linear_gelu oneDNN: skipped: no avx512_bf16 on this CPU\n");
    } else {
        Gemm *onednn = context(&pool, GEMM_BF16_ONEDNN, W, O * I);
        float *s2 = nans(&pool, N * O), *a2 = nans(&pool, N * O);
        linear_gelu_forward(onednn, s2, a2, in, W, b, N, I, O);
        err = fmax(rel_err_f(a2, act, N * O), rel_err_f(s2, slope, N * O));
        CHECK(t, err < 1e-5, "linear_gelu_forward act, slope: oneDNN = emulation to fp32 accumulation (%.2e)", err);
        gemm_free(onednn);
    }
    gemm_free(emulated);
    pool_release(&pool);
}

typedef struct {
    HeadActs a;
    HeadParams g;
    float *d_hidden, *d_word_emb;
} HeadRun;

static HeadRun run_head(Pool *pool, Gemm *gemm, const float *hidden, const int *rows, const HeadParams *p,
                        const float *word_emb, const float *d_logits) {
    HeadRun r = {{zeros(pool, M * H), zeros(pool, M * H), zeros(pool, M * H), zeros(pool, M * H), zeros(pool, M),
                  zeros(pool, M), nans(pool, M * V)},
                 {zeros(pool, H * H), zeros(pool, H), zeros(pool, H), zeros(pool, H), zeros(pool, V)},
                 zeros(pool, N * H), zeros(pool, V * H)};
    mlm_head_forward(gemm, &r.a, hidden, rows, M, p, word_emb, H, V, 1e-12f, 0);
    float *logits = copy(pool, r.a.logits, M * V);
    mlm_head_backward(gemm, r.d_hidden, &r.g, r.d_word_emb, copy(pool, d_logits, M * V), zeros(pool, 2 * M * H),
                      &r.a, rows, M, p, word_emb, H, V);
    r.a.logits = logits;
    return r;
}

static void test_mlm_head(TestTally *t, Rng *rng, int hardware) {
    Pool pool = {0};
    float *hidden = uniform(&pool, rng, N * H, -1, 1), *word_emb = uniform(&pool, rng, V * H, -1, 1);
    float *d_logits = uniform(&pool, rng, M * V, -1, 1);
    int rows[M];
    for (int m = 0; m < M; m++)
        rows[m] = 4 * m + 1;
    HeadParams p = {uniform(&pool, rng, H * H, -0.2f, 0.2f), uniform(&pool, rng, H, -0.5f, 0.5f),
                    uniform(&pool, rng, H, 0.5f, 1.5f), uniform(&pool, rng, H, -0.5f, 0.5f),
                    uniform(&pool, rng, V, -0.5f, 0.5f)};
    /* the weights block holds the transform weight and the tied decoder (word embeddings) */
    float *weights = zeros(&pool, H * H + V * H);
    memcpy(weights, p.transform_w, sizeof(float) * H * H);
    memcpy(weights + H * H, word_emb, sizeof(float) * V * H);
    p.transform_w = weights, word_emb = weights + H * H;
    Gemm *emulated = context(&pool, GEMM_BF16_EMULATED, weights, H * H + V * H);
    HeadRun e = run_head(&pool, emulated, hidden, rows, &p, word_emb, d_logits);
    HeadRun f = run_head(&pool, NULL, hidden, rows, &p, word_emb, d_logits);
    double err = fmax(fmax(rel_err_f(e.a.logits, f.a.logits, M * V), rel_err_f(e.d_hidden, f.d_hidden, N * H)),
                      fmax(rel_err_f(e.d_word_emb, f.d_word_emb, V * H), rel_err_f(e.g.transform_w, f.g.transform_w, H * H)));
    CHECK(t, err > 1e-4 && err < 6e-2, "mlm_head bf16 (emulated) logits and gradients within the bf16 tolerance of "
          "fp32 and not equal to it (%.2e of scale)", err);
    GemmStats st = gemm_stats(emulated);
    /* forward: gathered (transform), out (decoder); backward: d_logits in place, out, d_out staged, gathered */
    const double expected = (double)M * H * 5 + (double)M * V;
    CHECK(t, st.products == 6 && st.converted_floats == expected, "mlm_head bf16: 6 products, the weights from their "
          "bf16 copy, d_logits converted once (%.0f floats converted, expected %.0f)", st.converted_floats, expected);
    if (!hardware) {
        printf("SKIP mlm_head oneDNN: skipped: no avx512_bf16 on this CPU\n");
    } else {
        Gemm *onednn = context(&pool, GEMM_BF16_ONEDNN, weights, H * H + V * H);
        HeadRun d = run_head(&pool, onednn, hidden, rows, &p, word_emb, d_logits);
        err = fmax(fmax(rel_err_f(d.a.logits, e.a.logits, M * V), rel_err_f(d.d_hidden, e.d_hidden, N * H)),
                   fmax(rel_err_f(d.d_word_emb, e.d_word_emb, V * H), rel_err_f(d.g.transform_w, e.g.transform_w, H * H)));
        CHECK(t, err < 2e-3, "mlm_head logits, d_hidden, d_word_emb, d_transform_w: oneDNN = emulation up to "
              "accumulation order (%.2e of scale)", err);
        gemm_free(onednn);
    }
    gemm_free(emulated);
    pool_release(&pool);
}

/* gemm_convert_in_place on rows wider than its 512-float chunk (two whole chunks and a part): each
 * row's first 2 cols bytes are bf16(row), bit for bit, and the operand's stride is 2 cols floats. */
static void test_convert_in_place(TestTally *t, Rng *rng) {
    enum { ROWS = 5, COLS = 2 * 512 + 76 };
    Pool pool = {0};
    float *x = uniform(&pool, rng, ROWS * COLS, -3, 3), *W = uniform(&pool, rng, O * I, -1, 1);
    for (int e = 0; e < ROWS * COLS; e += 7) /* ties of the rounding, to even both ways */
        x[e] = (float)(1 + e % 3) + (e % 2 ? 1.0f : 3.0f) / 256.0f;
    bf16 *expected = to_bf16(&pool, x, ROWS * COLS), *rows16 = pool_alloc(&pool, ROWS * COLS, sizeof(bf16));
    Gemm *g = context(&pool, GEMM_BF16_EMULATED, W, O * I);
    size_t ld = 0;
    const GemmOperand op = gemm_convert_in_place(g, x, ROWS, COLS, &ld);
    for (int r = 0; r < ROWS; r++)
        memcpy(rows16 + (size_t)r * COLS, x + (size_t)r * COLS, COLS * sizeof(bf16));
    CHECK(t, same_bf16(rows16, expected, ROWS * COLS) && ld == 2 * COLS && op.b16 == (const bf16 *)x,
          "gemm_convert_in_place [%d, %d] (chunks of 512 and a part): each row's bf16 in place, bit for bit, "
          "stride %zu", ROWS, COLS, ld);
    gemm_free(g);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0};
    Rng rng;
    rng_seed(&rng, 2027);
    CpuBf16 cpu = cpu_bf16_query();
    const int hardware = cpu_bf16_available(&cpu);
    test_linear(&t, &rng, hardware);
    test_linear_gelu(&t, &rng, hardware);
    test_bf16_variants(&t, &rng);
    test_mlm_head(&t, &rng, hardware);
    test_convert_in_place(&t, &rng);
    return tally_exit(&t);
}
