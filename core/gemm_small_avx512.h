/* The AVX-512 kernel of core/gemm_small.h for core/gemm_small_driver.h (compiled for AVX-512F by
 * function attributes; its caller checks the CPU has it). */
#pragma once

#include "core/gemm_small_driver.h"

extern const GemmSmallKernel gemm_small_avx512_kernel;
