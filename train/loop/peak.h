/* The peak of this machine: the denominator of MFU in training logs and of the bench's "fraction
 * of peak", and the names of the CPU and of the BLAS kernels.
 *
 * MFU = model FLOP/s / peak FLOP/s, where model FLOP/s is what loss_flops counts (the GEMMs of the
 * forward and backward, attention included) divided by the window's step time, and the peak is
 * the fastest cblas_sgemm this machine has been seen to run at this thread count: a measured
 * peak, not a theoretical one (cores x FMA units x vector width x 2 x clock). Under KVM neither
 * the clock nor the number of FMA units per core is visible, and OpenBLAS may run kernels far
 * below the vector width the CPU has (the Prescott fallback, README "Performance"): against a
 * datasheet number every run would read low for reasons that are not realpos's. Against the
 * measured sgemm peak, MFU says how close the step comes to the best GEMM of the library it uses.
 *
 * One probe is one timed n x n x n sgemm (n = 1024, 2.1 GFLOP). A probe that runs in a slow
 * moment of a shared machine reads low, never high, so every source below is a lower bound of the
 * machine's true sgemm rate, and the peak is their maximum:
 *   probe     the best of PEAK_STARTUP_PROBES probes at start-up (after one warm-up call), and
 *             one more at each of the first PEAK_SPREAD_PROBES metrics records (peak_refine), so
 *             that the probes are spread over the first minutes of a run, not one moment;
 *   cache     the best probe ever recorded on this host for this CPU model, OpenBLAS kernel family
 *             and thread count, in $XDG_CACHE_HOME/realpos/ (default ~/.cache/realpos/), one JSON
 *             file per key, updated (temp + rename) whenever a probe beats it;
 *   observed  a metrics window whose achieved model FLOP/s exceeds every probe: the step's GEMMs
 *             ran at least that fast, so the machine can; the peak is raised to it (not cached:
 *             the cache holds sgemm probes only);
 *   REALPOS_PEAK_GFLOPS  the environment fixes the starting peak (no start-up or spread probe, no
 *             cache); a faster window (or a probe the caller runs, as realpos bench does) still
 *             raises it.
 * Because the peak is raised to any faster window before the fraction is taken, MFU <= 1 holds by
 * construction: no clamp, and a printed 100% means the window ran at the fastest rate seen.
 * REALPOS_PEAK_CACHE=off runs without the cache (neither read nor written). */
#pragma once
#include <stddef.h>

enum { PEAK_STARTUP_PROBES = 5, PEAK_SPREAD_PROBES = 8, PEAK_PROBE_MULTIPLE = 16 };

/* A cache entry is believed only up to what the CPU can do: the higher of peak_hardware_bound and
 * PEAK_PROBE_MULTIPLE x the run's best probe (a loaded machine's probes read low, by 10x in
 * issue 29's example, never high); a higher entry (1e30) is ignored with a note. A cache path that
 * is not a regular file (a FIFO) is ignored with a note, and the cache is off for the run. */
double peak_hardware_bound(int threads);

/* One timed sgemm on the calling process's threads: GFLOP/s. Tests inject their own. */
typedef double (*PeakProbeFn)(void *ctx);

typedef struct {
    double gflops;         /* the peak now, of this process on `threads` threads */
    const char *source;    /* which source set it: "probe", "cache", "observed" or "REALPOS_PEAK_GFLOPS" */
    int threads;
    int probes;            /* probes run by this process so far */
    double probe_gflops;   /* their best (0 when none ran) */
    double cached_gflops;  /* what the cache file holds (0: no cache or no entry yet) */
    char cached_at[32];    /* when the cache's best probe ran (UTC, ISO 8601) */
    int spread_left;       /* probes still to run at metrics records */
    char cache_path[4096]; /* "" when the cache is off */
    char cpu_model[256], blas_core[64];
    PeakProbeFn probe;
    void *probe_ctx;
} PeakEstimate;

/* The peak at `threads` OpenMP threads from the probe, cache and environment above. Never fatal:
 * an unreadable or unwritable cache is logged once and the run goes on without it. */
PeakEstimate peak_estimate(int threads);
/* The same with an injected probe and cache file (NULL: no cache), ignoring the environment. */
PeakEstimate peak_estimate_with(int threads, PeakProbeFn probe, void *probe_ctx, const char *cache_path);

/* Run one probe now; the peak and the cache take it if it is faster. Returns its GFLOP/s. */
double peak_probe(PeakEstimate *p);
/* At a metrics record: one of the spread probes, if any are left (outside the step's time; the
 * probe allocates and frees its 12 MB of operands, so it belongs between steps, never in one). */
void peak_refine(PeakEstimate *p);
/* achieved_gflops / peak, in [0, 1]: first raises the peak to achieved_gflops if it is faster
 * (source "observed"). 0 when achieved is not positive. */
double peak_utilisation(PeakEstimate *p, double achieved_gflops);
/* One line for logs: "186.2 GFLOP/s (cache: best probe of 2026-12-01T09:41Z, ~/.cache/...; this
 * run's best of 5 probes 101.3)". */
void peak_describe(const PeakEstimate *p, char *out, size_t size);

/* The default probe: one timed 1024^3 sgemm, no warm-up (ctx unused). */
double sgemm_probe_gflops(void *ctx);

/* "model name" of /proc/cpuinfo into out (or "unknown"), and OpenBLAS's kernel family in use
 * (openblas_get_corename, e.g. "Haswell", "SkylakeX", "Prescott"). */
void cpu_model_name(char *out, size_t size);
const char *blas_core_name(void);
