/* Measured cblas_sgemm throughput of this machine on all threads (GFLOP/s): the denominator of
 * MFU and of the bench's "fraction of peak", and the names of the CPU and of the BLAS kernels. */
#pragma once
#include <stddef.h>

/* One timed n x n x n sgemm (n = 1024, about 2 GFLOP) on all threads, no warm-up; GFLOP/s. */
double sgemm_probe_gflops(void);

/* The best of `probes` probes after one warm-up call. A probe that runs in a slow moment of a
 * shared machine reads low, never high, so the maximum is the robust estimate (about 0.3 s on a
 * quiet 2-core AVX-512 machine with probes = 5). */
double sgemm_peak_gflops_best(int probes);

/* sgemm_peak_gflops_best(5): what training logs measure once at start-up. */
double sgemm_peak_gflops(void);

/* achieved / peak clamped to [0, 1]: a fraction of peak is never printed above 100% even when
 * the peak probe ran slow (0 when peak is not positive). */
double peak_fraction(double achieved, double peak);

/* "model name" of /proc/cpuinfo into out (or "unknown"), and OpenBLAS's kernel family in use
 * (openblas_get_corename, e.g. "Haswell", "SkylakeX", "Prescott"). */
void cpu_model_name(char *out, size_t size);
const char *blas_core_name(void);
