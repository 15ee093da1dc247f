/* Internal to core/gemm.c: its oneDNN side, the one owner of the CPU engine. Every bf16 product,
 * the context's own (gemm, outside parallel regions) and the attention's inside them (gemm_lane, one
 * thread per lane), runs on a matmul primitive with every dimension and stride a runtime argument,
 * keyed by (op(A), op(B), alpha, beta) alone, so no row count (an unpadded batch's T, a padded
 * batch's B x L, the MLM head's predictions) creates a primitive inside the step. */
#pragma once
#include "core/bf16.h"

typedef struct GemmLanes GemmLanes;

typedef struct {
    long products, memories_created, primitives_created;
    double flops, seconds;
} GemmLaneStats;

/* onednn: the engine, the 9 primitives a step uses (alpha 1, beta 0 or 1, each op(A), op(B); and
 * A B^T + bias), and the context's own lane (stream, scratchpad, memory objects). onednn = 0: the
 * stats only (the emulated backend). */
GemmLanes *gemm_lanes_create(int onednn);
/* `lanes` lanes for the threads of parallel regions (once, before any gemm_lanes_run). */
void gemm_lanes_reserve(GemmLanes *l, int lanes);
void gemm_lanes_free(GemmLanes *l);
int gemm_lanes_count(const GemmLanes *l); /* the threads' lanes reserved */
/* C = op(A) op(B) + beta C on thread lane `lane` (beta 0 or 1; ta, tb: 1 = transposed, as GemmOp);
 * with bias [N] (A B^T and beta 0 only: a linear layer's forward) C = A B^T + bias, the bias added
 * to each element's finished sum. */
void gemm_lanes_run(GemmLanes *l, int lane, int ta, int tb, int M, int N, int K, const bf16 *A, int lda,
                    const bf16 *B, int ldb, float beta, const float *bias, float *C, int ldc);
/* C = alpha op(A) op(B) + beta C on the context's lane, outside parallel regions (oneDNN's threads
 * share the product); a (alpha, beta) other than (1, 0 or 1) creates its primitive on first use. */
void gemm_lanes_run_shared(GemmLanes *l, int ta, int tb, int M, int N, int K, float alpha, const bf16 *A, int lda,
                           const bf16 *B, int ldb, float beta, float *C, int ldc);
/* Whether an element of a product computed on a lane has the same bits whatever part of C the call
 * computes (its rows and columns of C): checked on lane 0 by computing small products of every
 * (op(A), op(B), beta) whole and in uneven blocks and comparing bit for bit. oneDNN 2.6's gemm:jit
 * sums each element over K in blocks fixed by K (measured, not documented): then the threads of a
 * step may share a product in as many blocks as there are threads, not in a grid fixed by the shape
 * (core/gemm.c). Once, after gemm_lanes_reserve; 1 for the emulated backend (its sum is per element). */
int gemm_lanes_extent_invariant(GemmLanes *l);
void gemm_lanes_count_product(GemmLanes *l, int lane, double flops, double seconds);
GemmLaneStats gemm_lanes_stats(const GemmLanes *l); /* the threads' lanes (primitives: all) */
/* The oneDNN implementation of the primitives (e.g. "gemm:jit"), "" before any. */
const char *gemm_lanes_implementation(const GemmLanes *l);
/* "oneDNN-MAJOR.MINOR.PATCH" of the library loaded at run time. */
void gemm_lanes_library_version(char *out, size_t size);
