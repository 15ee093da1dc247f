/* The matrix-product interface (core/gemm.h): cblas_sgemm for fp32, oneDNN matmul or the
 * emulation for bf16, with bf16 operands given in bf16, from the weights' copy, the staged block or
 * the scratch. */
#include "core/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/gemm_lane.h"
#include "core/gemm_partition.h"
#include "core/gemm_small.h"

const char *const precision_names[] = {"fp32", "bf16", NULL};

/* OpenBLAS splits a product among its threads by the thread count, and with some of its kernels
 * (Haswell, Prescott: what 0.3.21 runs on CPUs it does not know) the edge of each split goes
 * through a kernel that rounds differently, so an element's bits depended on the thread count
 * (issue 33: 3715 of 96 x 1030 elements at 1 vs 2 threads). The product is split here instead,
 * into the blocks of core/gemm_partition.h, fixed by its shape alone. Each block is one OpenBLAS
 * call made inside a parallel region, where OpenBLAS runs on the calling thread (also when there
 * is one block): every element comes from the same call at any thread count. A product on
 * gemm_small is shared one block a thread instead (gemm_partition_threads): its elements' bits do
 * not depend on the block. */
static void sgemm_part(int small, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    if (small && bias) {
        gemm_small_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc);
        return;
    }
    if (small) {
        gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta == GEMM_T ? CblasTrans : CblasNoTrans, tb == GEMM_T ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The engine of an fp32 product, the same for all its blocks and at any thread count: gemm_small
 * up to its bound, and above it where it outruns the kernels OpenBLAS runs here
 * (gemm_small_outruns_blas: e.g. OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU), else OpenBLAS. */
int gemm_f32_on_small(int M, int N, int K, float alpha) {
    return gemm_small_fits(M, N, K, alpha) ||
           (alpha == 1.0f && M >= 0 && N >= 0 && K >= 0 &&
            gemm_small_outruns_blas(openblas_get_corename(), gemm_small_isa_runs_here(GEMM_SMALL_AVX512)));
}

/* gemm_f32, or with bias (gemm_small's products only) gemm_bias's */
static void f32_product(GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    /* the engine by the whole product's shape, the same for all its parts */
    const int small = gemm_f32_on_small(M, N, K, alpha);
    /* gemm_small's elements do not depend on the block that computes them (one fma chain each):
     * one block a thread; OpenBLAS's do, so its blocks are fixed by the shape */
    const GemmPartition grid = small ? gemm_partition_threads(M, N, K, omp_get_max_threads()) : gemm_partition(M, N, K);
    const int parts = gemm_partition_parts(&grid);
    /* Nothing to split, or one thread's work already (the per-head attention products). The level,
     * not omp_in_parallel(): a region of one thread is inactive, and opening another inside it
     * costs a futex wake per product (1.6 per thousand FLOP of a width-64 model at 1 thread). And a
     * small product with one part or one thread: gemm_small's bits do not depend on the parts, and it
     * starts no threads of its own (no region needed, whose end costs a futex wake even at 1 thread). */
    if (parts == 0 || omp_get_level() > 0 || (small && (parts == 1 || omp_get_max_threads() == 1))) {
        sgemm_part(small, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, ldc);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int part = 0; part < parts; part++) {
        int row, col, rows, cols; /* C [row .., col ..]: rows row .. of op(A), columns col .. of op(B) */
        gemm_partition_block(&grid, M, N, part, &row, &col, &rows, &cols);
        const float *A_part = ta == GEMM_T ? A + row : A + (size_t)row * lda;
        const float *B_part = tb == GEMM_T ? B + (size_t)col * ldb : B + col;
        sgemm_part(small, ta, tb, rows, cols, K, alpha, A_part, lda, B_part, ldb, beta, bias ? bias + col : NULL,
                   C + (size_t)row * ldc + col, ldc);
    }
}

void gemm_f32(GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    f32_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc);
}

int gemm_fuses_bias(const Gemm *g, int M, int N, int K) {
    if (gemm_precision(g) == PRECISION_FP32)
        return gemm_f32_on_small(M, N, K, 1.0f);
    /* oneDNN on the lanes (onednn_product's split; inside a region it shares the product instead) */
    return gemm_backend(g) == GEMM_BF16_ONEDNN && gemm_lanes_reserved(g) && omp_get_level() == 0;
}

static void typed_product(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, GemmOperand A, int lda,
                          GemmOperand B, int ldb, float beta, const float *bias, float *C, int ldc);

void gemm_bias(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, GemmOperand A, int lda, GemmOperand B, int ldb,
               const float *bias, float *C, int ldc) {
    RP_CHECK(gemm_fuses_bias(g, M, N, K), "internal: gemm_bias: a %s %d x %d x %d product (gemm_fuses_bias: fp32 "
             "of gemm_small's sizes, or bf16 on oneDNN's lanes)", gemm_precision(g) == PRECISION_FP32 ? "fp32" : "bf16",
             M, N, K);
    if (gemm_precision(g) == PRECISION_FP32) {
        RP_CHECK(A.f32 && B.f32, "internal: gemm_bias: a bf16 operand in an fp32 context");
        f32_product(ta, tb, M, N, K, 1.0f, A.f32, lda, B.f32, ldb, 0.0f, bias, C, ldc);
        return;
    }
    RP_CHECK(ta == GEMM_N && tb == GEMM_T, "internal: gemm_bias: bf16 with a bias computes A B^T only");
    typed_product(g, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, bias, C, ldc);
}

/* Element (r, c) of op(X) for X stored with row stride ld. */
#define AT(X, op, ld, r, c) ((op) == GEMM_T ? (X)[(size_t)(c) * (ld) + (r)] : (X)[(size_t)(r) * (ld) + (c)])

void gemm_bf16_reference(GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++)
                sum += (double)(bf16_round(AT(A, ta, lda, m, k)) * bf16_round(AT(B, tb, ldb, k, n)));
            float *c = &C[(size_t)m * ldc + n];
            *c = (float)(alpha * sum + (beta != 0.0f ? (double)beta * *c : 0.0));
        }
}

/* Row m of the same arithmetic on operands already in bf16 (the emulated backend). */
static void emulated_row(GemmOp ta, GemmOp tb, int m, int N, int K, float alpha, const bf16 *A, size_t lda,
                         const bf16 *B, size_t ldb, float beta, float *C, int ldc) {
    for (int n = 0; n < N; n++) {
        double sum = 0.0;
        for (int k = 0; k < K; k++)
            sum += (double)(bf16_to_float(AT(A, ta, lda, m, k)) * bf16_to_float(AT(B, tb, ldb, k, n)));
        float *c = &C[(size_t)m * ldc + n];
        *c = (float)(alpha * sum + (beta != 0.0f ? (double)beta * *c : 0.0));
    }
}

/* Its rows over the threads, or on this thread alone inside a region (a lane's product, gemm_lane):
 * a region nested there would be a team of one and a futex wake per product. */
static void emulated_product(GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const bf16 *A,
                             size_t lda, const bf16 *B, size_t ldb, float beta, float *C, int ldc) {
    if (omp_get_level() > 0) {
        for (int m = 0; m < M; m++)
            emulated_row(ta, tb, m, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
        emulated_row(ta, tb, m, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

GemmBackend gemm_host_backend(void) {
    return env_switch("REALPOS_BF16_EMULATE", 0) ? GEMM_BF16_EMULATED : GEMM_BF16_ONEDNN;
}

int gemm_bf16_runs_here(CpuBf16 *cpu) {
    *cpu = cpu_bf16_query();
    return cpu_bf16_available(cpu) || gemm_host_backend() == GEMM_BF16_EMULATED;
}

void gemm_require_precision(Precision precision, const char *setting) {
    CpuBf16 cpu;
    RP_CHECK(precision != PRECISION_BF16 || gemm_bf16_runs_here(&cpu), "%s: bf16 needs a CPU with avx512_bf16 or "
             "amx_bf16; this one (%s) has neither: use fp32", setting, cpu.cpu);
}

/* ---- the context ---------------------------------------------------------------------------- */
/* An fp32 block and its bf16 copy, laid out alike (the weights, the staged block). */
typedef struct {
    const float *base;
    size_t count;
    const bf16 *copy;
} Bf16Copy;

struct Gemm {
    Precision precision;
    GemmBackend backend;
    Bf16Copy weights, staged; /* staged.base NULL: nothing staged */
    bf16 *stage, *convert[2];
    size_t stage_floats, convert_floats;
    GemmStats stats;
    GemmLanes *lanes; /* the oneDNN side (core/gemm_lane.h): engine, primitives, lanes */
    int blocks_by_threads; /* share a product in gemm_partition_threads's grid (else gemm_partition's) */
};

static bf16 *alloc_bf16(size_t count) {
    /* xalloc_floats is 64-byte aligned and zeroed: half as many floats hold the bf16s */
    return count ? (bf16 *)xalloc_floats((count + 1) / 2) : NULL;
}

Gemm *gemm_create(Precision precision, GemmBackend backend, size_t stage_floats, size_t convert_floats) {
    Gemm *g = xcalloc(1, sizeof *g);
    g->precision = precision;
    g->backend = backend;
    if (precision == PRECISION_FP32)
        return g;
    g->stage_floats = stage_floats;
    g->convert_floats = convert_floats;
    g->stage = alloc_bf16(stage_floats);
    g->convert[0] = alloc_bf16(convert_floats);
    g->convert[1] = alloc_bf16(convert_floats);
    g->lanes = gemm_lanes_create(backend == GEMM_BF16_ONEDNN);
    return g;
}

void gemm_free(Gemm *g) {
    if (!g)
        return;
    gemm_lanes_free(g->lanes);
    free(g->stage);
    free(g->convert[0]);
    free(g->convert[1]);
    free(g);
}

Precision gemm_precision(const Gemm *g) { return g ? g->precision : PRECISION_FP32; }

GemmBackend gemm_backend(const Gemm *g) { return g ? g->backend : GEMM_BF16_ONEDNN; }

const char *gemm_engine_name(const Gemm *g) {
    if (gemm_precision(g) == PRECISION_FP32)
        return "OpenBLAS";
    return g->backend == GEMM_BF16_EMULATED ? "emulated" : "oneDNN";
}

void gemm_engine_version(Precision precision, GemmBackend backend, char *out, size_t size) {
    if (precision == PRECISION_BF16 && backend == GEMM_BF16_EMULATED) {
        snprintf(out, size, "emulated");
    } else if (precision == PRECISION_BF16) {
        gemm_lanes_library_version(out, size);
    } else { /* openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" */
        char version[32] = "unknown";
        if (sscanf(openblas_get_config(), "OpenBLAS %31s", version) != 1)
            snprintf(version, sizeof version, "unknown");
        snprintf(out, size, "OpenBLAS-%s", version);
    }
}

GemmStats gemm_stats(const Gemm *g) {
    GemmStats none = {0};
    if (!g)
        return none;
    GemmStats s = g->stats;
    const GemmLaneStats lanes = gemm_lanes_stats(g->lanes);
    s.lane_products = lanes.products;
    s.lane_flops = lanes.flops;
    s.lane_seconds = lanes.seconds;
    s.primitives_created = lanes.primitives_created;
    snprintf(s.implementation, sizeof s.implementation, "%s", gemm_lanes_implementation(g->lanes));
    return s;
}

void gemm_reserve_lanes(Gemm *g, int lanes) {
    RP_CHECK(gemm_precision(g) == PRECISION_BF16 && !gemm_lanes_count(g->lanes) && lanes > 0,
             "internal: gemm_reserve_lanes: once, on a bf16 context, lanes > 0 (%d)", lanes);
    gemm_lanes_reserve(g->lanes, lanes);
    g->blocks_by_threads = !env_switch("REALPOS_GEMM_FIXED_GRID", 0) && gemm_lanes_extent_invariant(g->lanes);
}

int gemm_blocks_by_threads(const Gemm *g) { return g ? g->blocks_by_threads : 0; }

int gemm_lanes_reserved(const Gemm *g) { return g ? gemm_lanes_count(g->lanes) : 0; }

void gemm_lane(Gemm *g, int lane, GemmOp ta, GemmOp tb, int M, int N, int K, const bf16 *A, int lda,
               const bf16 *B, int ldb, float beta, float *C, int ldc) {
    RP_CHECK(g && gemm_lanes_count(g->lanes), "internal: gemm_lane without gemm_reserve_lanes");
    if (M <= 0 || N <= 0 || K <= 0) { /* no products (K = 0: C = beta C, beta 0 or 1) */
        for (int m = 0; m < M && beta == 0.0f; m++)
            memset(C + (size_t)m * ldc, 0, (size_t)(N > 0 ? N : 0) * sizeof *C);
        return;
    }
    const double t0 = omp_get_wtime();
    if (g->backend == GEMM_BF16_EMULATED)
        emulated_product(ta, tb, M, N, K, 1.0f, A, (size_t)lda, B, (size_t)ldb, beta, C, ldc);
    else
        gemm_lanes_run(g->lanes, lane, ta == GEMM_T, tb == GEMM_T, M, N, K, A, lda, B, ldb, beta, NULL, C, ldc);
    gemm_lanes_count_product(g->lanes, lane, 2.0 * M * N * (double)K, omp_get_wtime() - t0);
}

void gemm_set_weights(Gemm *g, const float *weights, size_t count, const bf16 *weights16) {
    RP_CHECK(gemm_precision(g) == PRECISION_BF16, "internal: gemm_set_weights: an fp32 context has no bf16 weights");
    g->weights = (Bf16Copy){weights, count, weights16};
}

/* The copy's bf16 form of x [count] when the block holds all of it, else NULL. */
static const bf16 *copy_of(const Bf16Copy *c, const float *x, size_t count) {
    return c->base && x >= c->base && x + count <= c->base + c->count ? c->copy + (x - c->base) : NULL;
}

GemmOperand gemm_stage(Gemm *g, const float *x, size_t rows, size_t cols, size_t ld) {
    if (gemm_precision(g) == PRECISION_FP32)
        return gemm_in_f32(x);
    size_t count = rows ? (rows - 1) * ld + cols : 0;
    RP_CHECK(!g->staged.base, "internal: gemm_stage: a block is staged already");
    RP_CHECK(count <= g->stage_floats, "internal: gemm_stage: %zu x %zu operand (row stride %zu) over the "
             "%zu floats the bf16 context was laid out for", rows, cols, ld, g->stage_floats);
    double t0 = omp_get_wtime();
    bf16_convert(g->stage, ld, x, ld, rows, cols);
    g->stats.convert_seconds += omp_get_wtime() - t0;
    g->stats.converted_floats += (double)rows * (double)cols;
    g->staged = (Bf16Copy){x, count, g->stage};
    return gemm_in_bf16(g->stage);
}

void gemm_unstage(Gemm *g) {
    if (gemm_precision(g) == PRECISION_FP32)
        return;
    RP_CHECK(g->staged.base, "internal: gemm_unstage without gemm_stage");
    g->staged = (Bf16Copy){NULL, 0, NULL};
}

GemmOperand gemm_convert_in_place(Gemm *g, float *x, size_t rows, size_t cols, size_t *ld) {
    if (gemm_precision(g) == PRECISION_FP32) {
        *ld = cols;
        return gemm_in_f32(x);
    }
    enum { CHUNK = 512 };
    double t0 = omp_get_wtime();
    /* Chunk [c, c+n) of a row lands on bytes [2c, 2c+2n), i.e. on fp32 elements below c+n, all
     * read by then: the chunk goes through a local buffer and memcpy (no type-punned stores). The
     * chunk's loop is inline, not bf16_convert_floats: that one's region, nested here, cost a team of
     * one per chunk (38040 a step for bert-mini's [634, 30522] d_logits, each a futex wake). */
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * cols;
        unsigned char *row16 = (unsigned char *)row;
        bf16 chunk16[CHUNK];
        for (size_t c = 0; c < cols; c += CHUNK) {
            const size_t n = cols - c < CHUNK ? cols - c : CHUNK;
            const float *restrict from = row + c;
#pragma omp simd
            for (size_t e = 0; e < n; e++)
                chunk16[e] = bf16_from_float(from[e]);
            memcpy(row16 + c * sizeof(bf16), chunk16, n * sizeof(bf16));
        }
    }
    g->stats.convert_seconds += omp_get_wtime() - t0;
    g->stats.converted_floats += (double)rows * (double)cols;
    *ld = 2 * cols;
    return gemm_in_bf16((const bf16 *)x);
}

/* The bf16 form of X [rows, cols] (row stride ld): given in bf16, or the weights' or the staged
 * block's copy (same stride), or converted into scratch `slot` (stride cols). */
static const bf16 *bf16_operand(Gemm *g, int slot, GemmOperand op, int rows, int cols, int ld, int64_t *ld16) {
    const size_t span = (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
    const float *X = op.f32;
    const bf16 *copy = op.b16;
    if (!copy)
        copy = copy_of(&g->weights, X, span);
    if (!copy)
        copy = copy_of(&g->staged, X, span);
    if (copy) {
        *ld16 = ld;
        return copy;
    }
    const size_t count = (size_t)rows * (size_t)cols;
    RP_CHECK(count <= g->convert_floats, "internal: gemm: a %d x %d operand over the %zu floats the bf16 "
             "context's scratch was laid out for", rows, cols, g->convert_floats);
    double t0 = omp_get_wtime();
    bf16_convert(g->convert[slot], (size_t)cols, X, (size_t)ld, (size_t)rows, (size_t)cols);
    g->stats.convert_seconds += omp_get_wtime() - t0;
    g->stats.converted_floats += (double)count;
    *ld16 = cols;
    return g->convert[slot];
}

double gemm_bf16_shapes_gflops(GemmBackend backend, const GemmShape *shapes, int count, float *borrowed,
                               size_t borrowed_floats, size_t *own_bytes) {
    size_t a_max = 1, b_max = 1, c_max = 1;
    for (int s = 0; s < count; s++) {
        const GemmShape *x = &shapes[s];
        a_max = (size_t)x->M * x->K > a_max ? (size_t)x->M * x->K : a_max;
        b_max = (size_t)x->K * x->N > b_max ? (size_t)x->K * x->N : b_max;
        c_max = (size_t)x->M * x->N > c_max ? (size_t)x->M * x->N : c_max;
    }
    /* in floats, each rounded up to 16 (64-byte aligned in an aligned block) */
    const size_t a_floats = (a_max + 31) / 32 * 16, b_floats = (b_max + 31) / 32 * 16;
    const int own = !borrowed || a_floats + b_floats + c_max > borrowed_floats;
    bf16 *a = own ? alloc_bf16(a_max) : (bf16 *)borrowed;
    bf16 *b = own ? alloc_bf16(b_max) : (bf16 *)(borrowed + a_floats);
    float *c = own ? xalloc_floats(c_max) : borrowed + a_floats + b_floats;
    if (own_bytes)
        *own_bytes = own ? (a_max + b_max) * sizeof(bf16) + c_max * sizeof(float) : 0;
    for (size_t e = 0; e < a_max; e++)
        a[e] = bf16_from_float((float)(e % 7) * 0.125f - 0.375f);
    for (size_t e = 0; e < b_max; e++)
        b[e] = bf16_from_float((float)(e % 5) * 0.125f - 0.25f);
    Gemm *g = gemm_create(PRECISION_BF16, backend, 0, 0);
    double flops = 0, seconds = 0;
    for (int pass = 0; pass < 2; pass++) /* pass 0 makes the memory objects and touches the pages: untimed */
        for (int s = 0; s < count; s++) {
            const GemmShape *x = &shapes[s];
            const int64_t lda = x->ta == GEMM_T ? x->M : x->K, ldb = x->tb == GEMM_T ? x->K : x->N;
            double t0 = omp_get_wtime();
            if (backend == GEMM_BF16_EMULATED) {
                emulated_product(x->ta, x->tb, x->M, x->N, x->K, 1.0f, a, (size_t)lda, b, (size_t)ldb, x->beta, c,
                                 x->N);
            } else {
                gemm_lanes_run_shared(g->lanes, x->ta == GEMM_T, x->tb == GEMM_T, x->M, x->N, x->K, 1.0f, a, (int)lda,
                                      b, (int)ldb, x->beta, c, x->N);
            }
            if (pass == 1)
                seconds += omp_get_wtime() - t0, flops += 2.0 * x->M * x->N * (double)x->K;
        }
    gemm_free(g);
    if (own)
        free(a), free(b), free(c);
    return flops > 0 ? flops / (seconds > 0 ? seconds : 1e-9) * 1e-9 : 0.0;
}

/* A bf16 product on oneDNN. oneDNN shares one product among its threads by the thread count, and at
 * 64 threads and more it splits it so that elements' bits change (issue 50: 12 of 69 datasets of a
 * width-256 model differed between 1 and 64 threads after 2 steps). With the lanes reserved (the
 * training step's context), the product is split here into blocks, each computed by one thread on
 * its lane over the whole of K: where an element's bits do not depend on the block that computes it
 * (gemm_lanes_extent_invariant, checked at gemm_reserve_lanes) one block a thread
 * (gemm_partition_threads), else the blocks fixed by the shape that gemm_f32 uses (gemm_partition):
 * either way the same bits at any thread count. Without lanes (the peak probes' contexts), or
 * another alpha or beta than (1, 0 or 1), oneDNN shares the product. */
static void onednn_product(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const bf16 *A, int lda,
                           const bf16 *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    const int lanes = gemm_lanes_count(g->lanes);
    if (!lanes || alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || omp_get_level() > 0) {
        RP_CHECK(!bias, "internal: gemm: a bf16 bias outside the lanes");
        gemm_lanes_run_shared(g->lanes, ta == GEMM_T, tb == GEMM_T, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const int threads = omp_get_max_threads() < lanes ? omp_get_max_threads() : lanes;
    const GemmPartition grid =
        g->blocks_by_threads ? gemm_partition_threads(M, N, K, threads) : gemm_partition(M, N, K);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int part = 0; part < gemm_partition_parts(&grid); part++) {
        int row, col, rows, cols;
        gemm_partition_block(&grid, M, N, part, &row, &col, &rows, &cols);
        const bf16 *A_part = ta == GEMM_T ? A + row : A + (size_t)row * lda;
        const bf16 *B_part = tb == GEMM_T ? B + (size_t)col * ldb : B + col;
        gemm_lanes_run(g->lanes, omp_get_thread_num(), ta == GEMM_T, tb == GEMM_T, rows, cols, K, A_part, lda, B_part,
                       ldb, beta, bias ? bias + col : NULL, C + (size_t)row * ldc + col, ldc);
    }
}

void gemm(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc) {
    gemm_operands(g, ta, tb, M, N, K, alpha, gemm_in_f32(A), lda, gemm_in_f32(B), ldb, beta, C, ldc);
}

void gemm_operands(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, GemmOperand A, int lda,
                   GemmOperand B, int ldb, float beta, float *C, int ldc) {
    typed_product(g, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc);
}

/* gemm_operands, and gemm_bias's bf16 products (bias [N] added on oneDNN's lanes) */
static void typed_product(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, GemmOperand A, int lda,
                          GemmOperand B, int ldb, float beta, const float *bias, float *C, int ldc) {
    if (gemm_precision(g) == PRECISION_FP32) {
        RP_CHECK(A.f32 && B.f32, "internal: gemm: a bf16 operand in an fp32 context");
        gemm_f32(ta, tb, M, N, K, alpha, A.f32, lda, B.f32, ldb, beta, C, ldc);
        return;
    }
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* no products: C = beta C (+ bias) */
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                C[(size_t)m * ldc + n] =
                    (beta != 0.0f ? beta * C[(size_t)m * ldc + n] : 0.0f) + (bias ? bias[n] : 0.0f);
        return;
    }
    RP_CHECK(!bias || g->backend == GEMM_BF16_ONEDNN, "internal: gemm: a bias on the emulated backend");
    int64_t lda16, ldb16;
    const bf16 *A16 = ta == GEMM_T ? bf16_operand(g, 0, A, K, M, lda, &lda16) : bf16_operand(g, 0, A, M, K, lda, &lda16);
    const bf16 *B16 = tb == GEMM_T ? bf16_operand(g, 1, B, N, K, ldb, &ldb16) : bf16_operand(g, 1, B, K, N, ldb, &ldb16);
    double t0 = omp_get_wtime();
    if (g->backend == GEMM_BF16_EMULATED) {
        emulated_product(ta, tb, M, N, K, alpha, A16, (size_t)lda16, B16, (size_t)ldb16, beta, C, ldc);
    } else {
        onednn_product(g, ta, tb, M, N, K, alpha, A16, (int)lda16, B16, (int)ldb16, beta, bias, C, ldc);
    }
    g->stats.product_seconds += omp_get_wtime() - t0;
    g->stats.product_flops += 2.0 * M * N * (double)K;
    g->stats.products++;
}
