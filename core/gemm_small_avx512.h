/* The AVX-512 kernel of core/gemm_small.h (compiled for AVX-512F by function attributes; its caller
 * checks the CPU has it): C [M,N] = op(A) op(B) + beta C as gemm_small's chains, K > 0; ta, tb:
 * 1 = transposed. */
#pragma once

void gemm_small_avx512(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                       float beta, float *C, int ldc);
