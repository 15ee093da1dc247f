/* Internal to core/gemm.c: the oneDNN side of gemm_lane (core/gemm.h), the products run inside
 * parallel regions, one thread per lane. */
#pragma once
#include "core/bf16.h"

typedef struct GemmLanes GemmLanes;

typedef struct {
    long products, memories_created;
    double flops, seconds;
} GemmLaneStats;

/* oneDNN: 8 runtime-shape primitives ((ta, tb, beta 0 or 1); alpha 1) and `lanes` streams and
 * scratchpads. onednn = 0: the stats only (the emulated backend). */
GemmLanes *gemm_lanes_create(int lanes, int onednn);
void gemm_lanes_free(GemmLanes *l);
int gemm_lanes_count(const GemmLanes *l);
/* C = op(A) op(B) + beta C on lane `lane` (beta 0 or 1; ta, tb: 1 = transposed, as GemmOp). */
void gemm_lanes_run(GemmLanes *l, int lane, int ta, int tb, int M, int N, int K, const bf16 *A, int lda,
                    const bf16 *B, int ldb, float beta, float *C, int ldc);
void gemm_lanes_count_product(GemmLanes *l, int lane, double flops, double seconds);
GemmLaneStats gemm_lanes_stats(const GemmLanes *l);
