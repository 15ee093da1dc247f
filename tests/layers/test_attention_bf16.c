/* Attention with a bf16 context (AttnShape.gemm: the term q.k, P.V, their backward products and
 * the Shaw / Method 4 table products in bf16 through gemm_lane; layers/attention.c, pos_shaw.c):
 *   - bit for bit against the emulation written out here: with the emulated backend (scheme none,
 *     no dropout, no padding) P = softmax(scale * bf16ref(Q, K^T)) and ctx = bf16ref(P, V),
 *     dV = bf16ref(P^T, dctx), bf16ref = gemm_bf16_reference, the softmax softmax_row_probs;
 *   - every scheme (with padding, residual, dropout cases, a blocked L = 36 case) against the
 *     double reference (attention_reference.c) within the bf16 tolerance BF16_TOL of each output's
 *     scale, and measurably away from the fp32 path (beyond its 1e-5: the products did run in bf16);
 *   - oneDNN (skipped, saying so, without avx512_bf16 / amx_bf16) within ONEDNN_TOL of the
 *     emulation (accumulation order only; one ulp of a bf16 rounding downstream at worst), and
 *     the same bits at 1 and 2 threads. */
#include <math.h>
#include <omp.h>

#include "core/gemm.h"
#include "layers/attention.h"
#include "layers/attention_reference.h"
#include "layers/layers.h"
#include "tests/layer_testing.h"

static const double BF16_TOL = 1.5e-2;  /* bf16 vs the double reference, of max |reference| */
static const double FP32_TOL = 1e-5;   /* the fp32 path's (test_attention.c) */
static const double ONEDNN_TOL = 2e-3; /* oneDNN vs the emulation, of max |emulation| */

typedef struct {
    const char *name;
    RelKind rel;
    int L, rel_k, residual;
    float dropout;
} Case;

enum { B = 2, H = 32, HEADS = 2 };

typedef struct {
    float *ctx, *probs, *d_qkv, *d_bias, *d_table, *d_carried;
    bf16 *ctx16; /* run_with(.., qkv16, ..): ctx in bf16 (AttnShape.ctx16; ctx NULL) */
} Outputs;

static AttnShape shape_of(const Case *c, Gemm *g, int threads) {
    return (AttnShape){.B = B, .L = c->L, .H = H, .num_heads = HEADS, .rel = c->rel, .rel_k = c->rel_k,
                       .residual = c->residual, .first_layer = 1, .carried_scale = 1.0f, .dropout = c->dropout,
                       .threads = threads, .t5_num_buckets = 8, .t5_max_distance = c->L / 2 + 2,
                       .rope_theta = 100.0f, .gemm = g};
}

/* One forward and backward (d_ctx = G); d_table and d_bias start at 0, d_carried at 0 (top layer).
 * qkv16 non-NULL: Q|K|V in bf16 and ctx written in bf16 (AttnShape.qkv16, ctx16: the model's bf16
 * layout; qkv and ctx NULL); offsets non-NULL: unpadded. */
static Outputs run_with(Pool *pool, const Case *c, Gemm *g, int threads, const float *qkv, const bf16 *qkv16,
                        const int *offsets, const float *table, size_t n_table, const int *mask, const float *G) {
    omp_set_num_threads(threads);
    AttnShape s = shape_of(c, g, threads);
    s.qkv16 = qkv16, s.seq_offsets = offsets;
    const size_t L = (size_t)c->L, sq = (size_t)B * HEADS * L * L, n_qkv = (size_t)B * L * 3 * H;
    Outputs o = {nans(pool, (size_t)B * L * H), nans(pool, sq), nans(pool, n_qkv), zeros(pool, 3 * H),
                 zeros(pool, n_table ? n_table : 1), zeros(pool, sq), NULL};
    if (qkv16) {
        o.ctx16 = pool_alloc(pool, (size_t)B * L * H, sizeof(bf16));
        s.ctx16 = o.ctx16, o.ctx = NULL;
    }
    float *raw = zeros(pool, sq), *carried = zeros(pool, sq), *scratch = zeros(pool, attention_scratch_floats(&s));
    attention_forward(o.ctx, o.probs, raw, carried, scratch, qkv, table, mask, &s, 99);
    attention_backward(o.d_qkv, o.d_bias, n_table ? o.d_table : NULL, c->residual ? o.d_carried : NULL, scratch, G,
                       qkv, table, o.probs, raw, &s, 99);
    return o;
}

static Outputs run(Pool *pool, const Case *c, Gemm *g, int threads, const float *qkv, const float *table,
                   size_t n_table, const int *mask, const float *G) {
    return run_with(pool, c, g, threads, qkv, NULL, NULL, table, n_table, mask, G);
}

/* Q|K|V given in bf16 and ctx written in bf16 (AttnShape.qkv16, ctx16, the model's layout in bf16:
 * products read qkv16 in place, rope and method3 expand it): every output the same bits as from the
 * fp32 qkv holding the same values (whose per-head rounding is then exact), ctx16 = bf16(its ctx),
 * padded and unpadded. */
static void test_qkv16(TestTally *t, const Case *c, Gemm *g, const float *qkv, const float *table, size_t n_table,
                       const int *mask, const float *G) {
    Pool pool = {0};
    const size_t L = (size_t)c->L, n_qkv = (size_t)B * L * 3 * H;
    const size_t sq = (size_t)B * HEADS * L * L;
    bf16 *qkv16 = pool_alloc(&pool, n_qkv, sizeof(bf16));
    float *qkv_r = nans(&pool, n_qkv);
    for (size_t e = 0; e < n_qkv; e++) {
        qkv16[e] = bf16_from_float(qkv[e]);
        qkv_r[e] = bf16_to_float(qkv16[e]);
    }
    const int offsets[B + 1] = {0, c->L, 2 * c->L - 3};
    for (int unpadded = 0; unpadded < 2; unpadded++) {
        const int *off = unpadded ? offsets : NULL;
        const Outputs a = run_with(&pool, c, g, 2, NULL, qkv16, off, table, n_table, mask, G);
        const Outputs r = run_with(&pool, c, g, 2, qkv_r, NULL, off, table, n_table, mask, G);
        const size_t rows = unpadded ? (size_t)offsets[B] : (size_t)B * L;
        const size_t n_sc = unpadded ? (size_t)HEADS * (L * L + (L - 3) * (L - 3)) : sq;
        int ctx_same = 1;
        for (size_t e = 0; e < rows * H; e++)
            ctx_same &= a.ctx16[e] == bf16_from_float(r.ctx[e]);
        CHECK(t, ctx_same && same_bits(a.probs, r.probs, n_sc) &&
                     same_bits(a.d_qkv, r.d_qkv, rows * 3 * H) && same_bits(a.d_bias, r.d_bias, 3 * H) &&
                     (!n_table || same_bits(a.d_table, r.d_table, n_table)) &&
                     (!c->residual || same_bits(a.d_carried, r.d_carried, n_sc)),
              "attention bf16 %s%s: Q|K|V in bf16 (qkv16) gives the bits of the fp32 qkv of its values, ctx16 its bf16(ctx)", c->name,
              unpadded ? " unpadded" : "");
    }
    pool_release(&pool);
}

static void test_case(TestTally *t, const Case *c, Gemm *emulated, Gemm *onednn, Rng *rng) {
    Pool pool = {0};
    const int d = H / HEADS, L = c->L;
    const size_t n_qkv = (size_t)B * L * 3 * H, n_ctx = (size_t)B * L * H, sq = (size_t)B * HEADS * L * L;
    const int scalar = c->rel == REL_METHOD1 || c->rel == REL_METHOD2;
    const size_t n_table = c->rel == REL_T5 ? (size_t)8 * HEADS
                                            : (size_t)attention_table_rows(c->rel, c->rel_k) *
                                                  attention_table_cols(c->rel, d);
    float *qkv = uniform(&pool, rng, n_qkv, -1.5f, 1.5f), *G = uniform(&pool, rng, n_ctx, -1, 1);
    float *table = n_table ? uniform(&pool, rng, n_table, scalar ? 0.5f : -0.7f, scalar ? 1.5f : 0.7f) : NULL;
    int *mask = pool_alloc(&pool, (size_t)B * L, sizeof(int));
    for (int b = 0; b < B; b++) /* sequence 1 has its last 3 keys padded */
        for (int i = 0; i < L; i++)
            mask[b * L + i] = !(b == 1 && i >= L - 3);
    const Outputs f32 = run(&pool, c, NULL, 2, qkv, table, n_table, mask, G);
    const Outputs emu = run(&pool, c, emulated, 2, qkv, table, n_table, mask, G);
    test_qkv16(t, c, emulated, qkv, table, n_table, mask, G);

    /* the double reference */
    const AttnShape s = shape_of(c, NULL, 1);
    double *qkv_d = doubles(&pool, qkv, n_qkv), *table_d = n_table ? doubles(&pool, table, n_table) : NULL;
    double *ctx_d = pool_alloc(&pool, n_ctx, sizeof(double)), *probs_d = pool_alloc(&pool, sq, sizeof(double));
    double *carried_d = pool_alloc(&pool, sq, sizeof(double)), *d_carried_d = pool_alloc(&pool, sq, sizeof(double));
    double *d_qkv_d = pool_alloc(&pool, n_qkv, sizeof(double)), *G_d = doubles(&pool, G, n_ctx);
    double *d_table_d = pool_alloc(&pool, n_table ? n_table : 1, sizeof(double));
    attention_reference_forward(ctx_d, probs_d, c->residual ? carried_d : NULL, qkv_d, table_d, mask, &s, 99);
    attention_reference_backward(d_qkv_d, n_table ? d_table_d : NULL, c->residual ? d_carried_d : NULL, G_d, qkv_d,
                                 table_d, probs_d, &s, 99);
    const double e_ctx = rel_err(emu.ctx, ctx_d, n_ctx), e_probs = rel_err(emu.probs, probs_d, sq);
    const double e_dqkv = rel_err(emu.d_qkv, d_qkv_d, n_qkv);
    const double e_table = n_table ? rel_err(emu.d_table, d_table_d, n_table) : 0.0;
    CHECK(t, e_ctx <= BF16_TOL && e_probs <= BF16_TOL && e_dqkv <= BF16_TOL && e_table <= BF16_TOL,
          "attention bf16 %s: ctx, probs, d_qkv, d_table within %.0e of the double reference (%.1e %.1e %.1e %.1e)",
          c->name, BF16_TOL, e_ctx, e_probs, e_dqkv, e_table);
    const double away = rel_err_f(emu.ctx, f32.ctx, n_ctx), away_d = rel_err_f(emu.d_qkv, f32.d_qkv, n_qkv);
    CHECK(t, away > FP32_TOL && away_d > FP32_TOL,
          "attention bf16 %s: ctx and d_qkv differ from the fp32 path beyond its tolerance (%.1e, %.1e: bf16 ran)",
          c->name, away, away_d);
    if (!onednn)
        return pool_release(&pool);
    const Outputs dnn = run(&pool, c, onednn, 2, qkv, table, n_table, mask, G);
    const Outputs dnn1 = run(&pool, c, onednn, 1, qkv, table, n_table, mask, G);
    const double o_ctx = rel_err_f(dnn.ctx, emu.ctx, n_ctx), o_dqkv = rel_err_f(dnn.d_qkv, emu.d_qkv, n_qkv);
    const double o_table = n_table ? rel_err_f(dnn.d_table, emu.d_table, n_table) : 0.0;
    const double o_bias = rel_err_f(dnn.d_bias, emu.d_bias, 3 * H);
    CHECK(t, o_ctx <= ONEDNN_TOL && o_dqkv <= ONEDNN_TOL && o_table <= ONEDNN_TOL && o_bias <= ONEDNN_TOL,
          "attention bf16 %s: oneDNN within %.0e of the emulation (ctx %.1e, d_qkv %.1e, d_table %.1e, d_bias %.1e)",
          c->name, ONEDNN_TOL, o_ctx, o_dqkv, o_table, o_bias);
    CHECK(t, same_bits(dnn.ctx, dnn1.ctx, n_ctx) && same_bits(dnn.d_qkv, dnn1.d_qkv, n_qkv) &&
                 (!n_table || same_bits(dnn.d_table, dnn1.d_table, n_table)),
          "attention bf16 %s: oneDNN, the same bits at 1 and 2 threads", c->name);
    pool_release(&pool);
}

/* Scheme none, no dropout, no padding: the emulated attention's P, ctx and dV, bit for bit, from
 * gemm_bf16_reference and softmax_row_probs (attention's softmax) per head. */
static void test_bits(TestTally *t, Gemm *emulated, Rng *rng) {
    Pool pool = {0};
    const Case c = {"none", REL_NONE, 20, 0, 0, 0.0f};
    const int L = c.L, d = H / HEADS, ld = 3 * H;
    const size_t n_qkv = (size_t)B * L * ld, n_ctx = (size_t)B * L * H, sq = (size_t)B * HEADS * L * L;
    float *qkv = uniform(&pool, rng, n_qkv, -1.5f, 1.5f), *G = uniform(&pool, rng, n_ctx, -1, 1);
    int *mask = pool_alloc(&pool, (size_t)B * L, sizeof(int));
    for (int e = 0; e < B * L; e++)
        mask[e] = 1;
    const Outputs emu = run(&pool, &c, emulated, 2, qkv, NULL, 0, mask, G);
    float *probs = nans(&pool, sq), *ctx = nans(&pool, n_ctx), *dv = nans(&pool, n_qkv);
    const float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HEADS; h++) {
            const float *q = qkv + (size_t)b * L * ld + (size_t)h * d, *k = q + H, *v = q + 2 * H;
            float *P = probs + ((size_t)b * HEADS + h) * L * L;
            gemm_bf16_reference(GEMM_N, GEMM_T, L, L, d, 1.0f, q, ld, k, ld, 0.0f, P, L);
            for (int i = 0; i < L; i++) {
                float *row = P + (size_t)i * L, max = -INFINITY;
                for (int j = 0; j < L; j++) {
                    row[j] = scale * row[j] + 0.0f; /* the logits pass: scale * S + (mask: 0) */
                    max = row[j] > max ? row[j] : max;
                }
                softmax_row_probs(row, row, L, max);
            }
            gemm_bf16_reference(GEMM_N, GEMM_N, L, d, L, 1.0f, P, L, v, ld, 0.0f,
                                ctx + (size_t)b * L * H + (size_t)h * d, H);
            gemm_bf16_reference(GEMM_T, GEMM_N, L, d, L, 1.0f, P, L, G + (size_t)b * L * H + (size_t)h * d, H, 0.0f,
                                dv + (size_t)b * L * ld + 2 * H + (size_t)h * d, ld);
        }
    int dv_same = 1;
    for (int n = 0; n < B * L; n++)
        dv_same &= same_bits(dv + (size_t)n * ld + 2 * H, emu.d_qkv + (size_t)n * ld + 2 * H, H);
    CHECK(t, same_bits(probs, emu.probs, sq) && same_bits(ctx, emu.ctx, n_ctx) && dv_same,
          "attention bf16 emulated: P, ctx = bf16ref(P, V) and dV = bf16ref(P^T, dctx) bit for bit");
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0};
    Rng rng;
    rng_seed(&rng, 3737);
    Gemm *emulated = gemm_create(PRECISION_BF16, GEMM_BF16_EMULATED, 0, 0);
    gemm_reserve_lanes(emulated, 2);
    CpuBf16 cpu = cpu_bf16_query();
    Gemm *onednn = NULL;
    if (cpu_bf16_available(&cpu)) {
        onednn = gemm_create(PRECISION_BF16, GEMM_BF16_ONEDNN, 0, 0);
        gemm_reserve_lanes(onednn, 2);
    } else {
        printf("SKIP attention bf16 oneDNN cases: skipped: no avx512_bf16 on this CPU (%s)\n", cpu.cpu);
    }
    test_bits(&t, emulated, &rng);
    const Case cases[] = {
        {"none", REL_NONE, 12, 0, 0, 0.0f},
        {"none-residual-dropout", REL_NONE, 12, 0, 1, 0.1f},
        {"shaw-k3", REL_SHAW, 12, 3, 0, 0.0f},
        {"method4-k3-residual", REL_METHOD4, 12, 3, 1, 0.0f},
        {"method4-k40-L36-dropout", REL_METHOD4, 36, 40, 0, 0.1f},
        {"method4-k5-L36", REL_METHOD4, 36, 5, 0, 0.0f},
        {"method1-k3", REL_METHOD1, 12, 3, 0, 0.0f},
        {"method3-k3", REL_METHOD3, 12, 3, 0, 0.0f},
        {"t5", REL_T5, 12, 0, 0, 0.0f},
        {"alibi", REL_ALIBI, 12, 0, 0, 0.0f},
        {"rope", REL_ROPE, 12, 0, 1, 0.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_case(&t, &cases[i], emulated, onednn, &rng);
    gemm_free(emulated);
    gemm_free(onednn);
    return tally_exit(&t);
}
