/* gemm_lane (core/gemm.h): the products run inside parallel regions, bf16 operands.
 *   - emulated: bit-identical to gemm_bf16_reference on the fp32 operands the bf16 ones round,
 *     for every op(A), op(B), beta 0 and 1, row strides wider than the rows;
 *   - oneDNN (skipped, saying so, without avx512_bf16/amx_bf16): two threads at once, each on its
 *     lane, every product within the fp32 accumulation bound of the reference, both lanes and a
 *     serial run the same bits; 20 shapes on one lane (more than the 16 it keeps) and the first
 *     again repeats its bits; K = 0 gives beta C; only C's N columns are written. */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "core/gemm.h"
#include "tests/layer_testing.h"

typedef struct {
    int ta, tb, M, N, K, beta;
} LaneShape;

/* op(A) [M,K], op(B) [K,N] with 3 padding columns in every stored row; C [M, N+2]. */
typedef struct {
    float *A, *B, *C0;
    bf16 *A16, *B16;
    int lda, ldb, ldc;
} LaneOperands;

static LaneOperands lane_operands(Pool *pool, Rng *rng, const LaneShape *s) {
    LaneOperands o;
    const int a_rows = s->ta ? s->K : s->M, a_cols = s->ta ? s->M : s->K;
    const int b_rows = s->tb ? s->N : s->K, b_cols = s->tb ? s->K : s->N;
    o.lda = a_cols + 3, o.ldb = b_cols + 3, o.ldc = s->N + 2;
    o.A = uniform(pool, rng, (size_t)a_rows * o.lda, -2, 2);
    o.B = uniform(pool, rng, (size_t)b_rows * o.ldb, -2, 2);
    o.C0 = uniform(pool, rng, (size_t)s->M * o.ldc, -1, 1);
    o.A16 = pool_alloc(pool, (size_t)a_rows * o.lda, sizeof(bf16));
    o.B16 = pool_alloc(pool, (size_t)b_rows * o.ldb, sizeof(bf16));
    bf16_convert_floats(o.A16, o.A, (size_t)a_rows * o.lda);
    bf16_convert_floats(o.B16, o.B, (size_t)b_rows * o.ldb);
    return o;
}

static void run_lane(Gemm *g, int lane, const LaneShape *s, const LaneOperands *o, float *C) {
    gemm_lane(g, lane, s->ta ? GEMM_T : GEMM_N, s->tb ? GEMM_T : GEMM_N, s->M, s->N, s->K, o->A16, o->lda, o->B16,
              o->ldb, (float)s->beta, C, o->ldc);
}

/* max over C of |got - ref| / ((K + 2) 2^-24 (sum_k |a b| + |beta C0|)): <= 1 within fp32 accumulation. */
static double accumulation_ratio(const LaneShape *s, const LaneOperands *o, const float *got, const float *ref) {
    double worst = 0;
    for (int m = 0; m < s->M; m++)
        for (int n = 0; n < s->N; n++) {
            double mag = 0;
            for (int k = 0; k < s->K; k++) {
                const float a = s->ta ? o->A[(size_t)k * o->lda + m] : o->A[(size_t)m * o->lda + k];
                const float b = s->tb ? o->B[(size_t)n * o->ldb + k] : o->B[(size_t)k * o->ldb + n];
                mag += fabs((double)bf16_round(a) * bf16_round(b));
            }
            const size_t e = (size_t)m * o->ldc + n;
            const double bound = (s->K + 2) * ldexp(1.0, -24) * (mag + s->beta * fabs((double)o->C0[e])) + 1e-30;
            const double r = fabs((double)got[e] - ref[e]) / bound;
            worst = r > worst ? r : worst;
        }
    return worst;
}

int main(void) {
    TestTally t = {0};
    Rng rng;
    rng_seed(&rng, 37);
    Pool pool = {0}, shape_pool[20];
    memset(shape_pool, 0, sizeof shape_pool); /* a pool holds 64 blocks: one per shape */
    enum { SHAPES = 20 };
    LaneShape shapes[SHAPES];
    for (int i = 0; i < SHAPES; i++) /* the 8 (ta, tb, beta) first, then more sizes */
        shapes[i] = (LaneShape){(i >> 2) & 1, (i >> 1) & 1, 5 + 3 * i, 7 + (i % 5) * 9, 4 + (i % 7) * 11, i & 1};
    LaneOperands o[SHAPES];
    float *ref[SHAPES];
    for (int i = 0; i < SHAPES; i++) {
        const LaneShape *s = &shapes[i];
        o[i] = lane_operands(&shape_pool[i], &rng, s);
        const size_t nc = (size_t)s->M * o[i].ldc;
        ref[i] = copy(&shape_pool[i], o[i].C0, nc);
        gemm_bf16_reference(s->ta ? GEMM_T : GEMM_N, s->tb ? GEMM_T : GEMM_N, s->M, s->N, s->K, 1.0f, o[i].A, o[i].lda,
                            o[i].B, o[i].ldb, (float)s->beta, ref[i], o[i].ldc);
    }

    Gemm *emulated = gemm_create(PRECISION_BF16, GEMM_BF16_EMULATED, 0, 0);
    gemm_reserve_lanes(emulated, 2);
    int same = 1;
    for (int i = 0; i < SHAPES; i++) {
        float *C = copy(&pool, o[i].C0, (size_t)shapes[i].M * o[i].ldc);
        run_lane(emulated, 1, &shapes[i], &o[i], C);
        same &= same_bits(C, ref[i], (size_t)shapes[i].M * o[i].ldc);
        free(pool.blocks[--pool.count]);
    }
    CHECK(&t, same, "gemm_lane emulated: %d products (every op(A), op(B), beta 0 and 1, strided) bit-identical "
          "to gemm_bf16_reference", SHAPES);
    float *c0 = uniform(&pool, &rng, 12, -1, 1), *c1 = copy(&pool, c0, 12), *c2 = copy(&pool, c0, 12);
    gemm_lane(emulated, 0, GEMM_N, GEMM_N, 3, 4, 0, o[0].A16, 1, o[0].B16, 4, 1.0f, c1, 4);
    gemm_lane(emulated, 0, GEMM_N, GEMM_N, 3, 4, 0, o[0].A16, 1, o[0].B16, 4, 0.0f, c2, 4);
    int zero = 1;
    for (int e = 0; e < 12; e++)
        zero &= c2[e] == 0.0f;
    CHECK(&t, same_bits(c0, c1, 12) && zero, "gemm_lane with K = 0: C = beta C (beta 1 keeps C, beta 0 zeroes it)");
    GemmStats st = gemm_stats(emulated);
    CHECK(&t, st.lane_products == SHAPES && st.lane_flops > 0, "gemm_stats counts the lanes' products (%ld)",
          st.lane_products);
    gemm_free(emulated);

    CpuBf16 cpu = cpu_bf16_query();
    if (!cpu_bf16_available(&cpu)) {
        printf("SKIP gemm_lane oneDNN: skipped: no avx512_bf16 on this CPU (%s)\n", cpu.cpu);
        pool_release(&pool);
        for (int i = 0; i < SHAPES; i++)
            pool_release(&shape_pool[i]);
        return tally_exit(&t);
    }
    Gemm *onednn = gemm_create(PRECISION_BF16, GEMM_BF16_ONEDNN, 0, 0);
    gemm_reserve_lanes(onednn, 2);
    float *out[2][SHAPES], *serial[SHAPES], *again = NULL;
    for (int i = 0; i < SHAPES; i++) {
        const size_t nc = (size_t)shapes[i].M * o[i].ldc;
        out[0][i] = copy(&shape_pool[i], o[i].C0, nc);
        out[1][i] = copy(&shape_pool[i], o[i].C0, nc);
        serial[i] = copy(&shape_pool[i], o[i].C0, nc);
    }
    again = copy(&pool, o[0].C0, (size_t)shapes[0].M * o[0].ldc);
    /* the two lanes at once (on two threads when the team has them), in opposite orders */
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int lane = 0; lane < 2; lane++)
        for (int i = 0; i < SHAPES; i++) {
            const int s = lane ? SHAPES - 1 - i : i;
            run_lane(onednn, lane, &shapes[s], &o[s], out[lane][s]);
        }
    for (int i = 0; i < SHAPES; i++)
        run_lane(onednn, 0, &shapes[i], &o[i], serial[i]);
    run_lane(onednn, 0, &shapes[0], &o[0], again); /* shape 0 was evicted from lane 0's 16 */
    double worst = 0;
    int bits_agree = 1, untouched = 1;
    for (int i = 0; i < SHAPES; i++) {
        const LaneShape *s = &shapes[i];
        const size_t nc = (size_t)s->M * o[i].ldc;
        const double r = accumulation_ratio(s, &o[i], out[0][i], ref[i]);
        worst = r > worst ? r : worst;
        bits_agree &= same_bits(out[0][i], out[1][i], nc) && same_bits(out[0][i], serial[i], nc);
        for (int m = 0; m < s->M; m++)
            for (int n = s->N; n < o[i].ldc; n++)
                untouched &= out[0][i][(size_t)m * o[i].ldc + n] == o[i].C0[(size_t)m * o[i].ldc + n];
    }
    CHECK(&t, worst <= 1.0, "gemm_lane oneDNN: %d products within the fp32 accumulation bound of the reference "
          "(worst %.3f of it)", SHAPES, worst);
    CHECK(&t, bits_agree, "gemm_lane oneDNN: two lanes at once and one lane alone give the same bits");
    CHECK(&t, same_bits(again, out[0][0], (size_t)shapes[0].M * o[0].ldc),
          "gemm_lane oneDNN: a shape evicted from the lane's 16 and met again repeats its bits");
    CHECK(&t, untouched, "gemm_lane oneDNN: only op(A) op(B)'s columns of C are written");
    gemm_free(onednn);
    pool_release(&pool);
    for (int i = 0; i < SHAPES; i++)
        pool_release(&shape_pool[i]);
    return tally_exit(&t);
}
