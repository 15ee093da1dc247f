/* Internal to core/gemm.c: the direct fp32 kernel for small products (no OpenBLAS call, no
 * packing of A, no threads), for the shapes of small models (widths 16-256, a few hundred rows),
 * and for every alpha-1 fp32 product where its AVX-512 kernel outruns the OpenBLAS kernels of the
 * run (gemm_small_outruns_blas).
 *
 *   C [M,N] = op(A) op(B) + beta C,  each element computed as one chain of fused multiply-adds in
 *   k order: c = (beta == 0 ? 0 : beta C); for k = 0 .. K-1: c = fma(op(A)[m,k], op(B)[k,n], c).
 *
 * Every element's bits are a function of its own row of op(A), column of op(B) and C alone: not of
 * M, N, the blocking, the vector width nor the part of a product a thread computes. Two kernels
 * compute these chains: AVX2 (the build's baseline, x86-64-v3) and AVX-512 (twice the lanes), used
 * when the CPU has AVX-512F; they give the same bits (tests/core/test_gemm_small.c). */
#pragma once

/* Whether gemm_small computes this product (by its shape and alpha alone: alpha 1 and at most
 * GEMM_SMALL_FLOPS_MAX FLOPs). */
int gemm_small_fits(int M, int N, int K, float alpha);
/* Whether gemm_small also outruns OpenBLAS above that bound: its AVX-512 kernel runs here
 * (cpu_avx512) and OpenBLAS runs an AVX2 or older core (blas_core, openblas_get_corename's name:
 * not SkylakeX, Cooperlake nor SapphireRapids, whose AVX-512 kernels are faster at those sizes). */
int gemm_small_outruns_blas(const char *blas_core, int cpu_avx512);
/* The product as above; M, N, K >= 0 (K = 0: C = beta C, with beta 0 writing zeros); ta, tb: 1 =
 * transposed (GemmOp's values; core/gemm.h is not included here, it includes this). On the
 * AVX-512 kernel where the CPU has AVX-512F, else on the AVX2 kernel. */
void gemm_small(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc);
/* The same with each element's chain started from bias [n] instead of beta C: C [M,N] = rows of
 * bias + op(A) op(B), the bits of C's rows set to bias and then the product with beta 1 (a linear
 * layer's output, without the pass that fills it with the bias). */
void gemm_small_bias(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                     const float *bias, float *C, int ldc);

typedef enum { GEMM_SMALL_AVX2 = 0, GEMM_SMALL_AVX512 } GemmSmallIsa;
/* Whether this CPU runs the kernel (AVX2: always, the build needs it). */
int gemm_small_isa_runs_here(GemmSmallIsa isa);
/* gemm_small (bias NULL) or gemm_small_bias on the given kernel (tests, scripts/dev/gemm_small.c); the
 * CPU must run it. */
void gemm_small_isa(GemmSmallIsa isa, int ta, int tb, int M, int N, int K, const float *A, int lda,
                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc);
