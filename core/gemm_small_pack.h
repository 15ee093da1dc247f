/* What the small-product kernels (core/gemm_small.c's AVX2, core/gemm_small_avx512.c) share: the
 * transposed panel copy and the rows of op(A) one pass over a strip of op(B) takes. */
#pragma once

/* About this many floats of op(A) per pass (half of a 1 MB L2). */
enum { GEMM_SMALL_PASS_FLOATS = 128 * 1024 };

/* panel [kc][nr] = op(B) [k0 .. k0+kc, n0 .. n0+nc] for op(B) = B^T (B [N,K], row stride ldb),
 * columns nc .. nr zero (nr a multiple of 8): 8 x 8 tiles transposed in AVX2 registers. */
void gemm_small_pack_transposed(float *restrict panel, int nr, const float *B, int ldb, int k0, int kc, int n0,
                                int nc);
/* The rows of op(A) a pass takes at kc values of k: about GEMM_SMALL_PASS_FLOATS, a multiple of mr
 * (at least mr). */
int gemm_small_rows_per_pass(int kc, int mr);
