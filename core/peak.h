/* Measured cblas_sgemm throughput of this machine on all threads (GFLOP/s): the denominator of
 * MFU and of the bench's "fraction of peak". Takes about 0.1-0.3 s. */
#pragma once
double sgemm_peak_gflops(void);
