/* The peak of this machine: the denominator of MFU in training logs and of the bench's "fraction
 * of peak", and the names of the CPU and of the BLAS kernels.
 *
 * MFU = model FLOP/s / peak FLOP/s, where model FLOP/s is what loss_flops counts (the GEMMs of the
 * forward and backward, attention included) divided by the window's step time, and the peak is
 * the fastest cblas_sgemm this machine has been seen to run at this thread count: a measured
 * peak, not a theoretical one (cores x FMA units x vector width x 2 x clock). Under KVM neither
 * the clock nor the number of FMA units per core is visible, and OpenBLAS may run kernels far
 * below the vector width the CPU has (the Prescott fallback, docs/bench.md): against a
 * datasheet number every run would read low for reasons that are not realpos's. Against the
 * measured sgemm peak, MFU says how close the step comes to the best GEMM of the library it uses.
 *
 * One probe is one timed n x n x n sgemm (n = 1024, 2.1 GFLOP). A probe that runs in a slow
 * moment of a shared machine reads low, never high, so every source below is a lower bound of the
 * machine's true sgemm rate, and the peak is their maximum:
 *   probe     the best of PEAK_STARTUP_PROBES probes at start-up (after one warm-up call), and
 *             one more at each of the first PEAK_SPREAD_PROBES metrics records (peak_refine), so
 *             that the probes are spread over the first minutes of a run, not one moment;
 *   cache     the best probe ever recorded on this host for this CPU model, OpenBLAS kernel family,
 *             its version and thread count, in $XDG_CACHE_HOME/realpos/ (default ~/.cache/realpos/), one JSON
 *             file per key, updated (temp + rename) whenever a probe beats it;
 *   observed  a metrics window whose achieved model FLOP/s exceeds every probe: the step's GEMMs
 *             ran at least that fast, so the machine can; the peak is raised to it (not cached:
 *             the cache holds sgemm probes only);
 *   REALPOS_PEAK_GFLOPS  the environment fixes the starting peak (no start-up or spread probe, no
 *             cache); a faster window (or a probe the caller runs, as realpos bench does) still
 *             raises it.
 * Because the peak is raised to any faster window before the fraction is taken, MFU <= 1 holds by
 * construction: no clamp, and a printed 100% means the window ran at the fastest rate seen.
 * REALPOS_PEAK_CACHE=off runs without the cache (neither read nor written).
 *
 * A bf16 run has its own peak (issue 37), measured the same way, with these differences:
 *   probe     one timed pass over the bf16 products of the step's linear layers (forward, input
 *             and weight gradients at the run's [B x L] tokens, PeakBf16Probe below; oneDNN, or
 *             the emulation under REALPOS_BF16_EMULATE), after an untimed pass that creates the
 *             primitives: the rate the step's own products can reach, where a 1024^3 product
 *             read 350 GFLOP/s against the step's 560;
 *   cache     its own file, peak-bf16-HOST-ENGINE-VERSION-TtokensxHhiddenxIintermediate-tTHREADS.json
 *             ("precision": "bf16" inside): the best pass over these shapes this host has run at
 *             this thread count (keyed by the shapes too: what one model's products reach is
 *             not a peak of another's, e.g. a tiny model's in-cache ones);
 *   observed  never: a window is divided by the bf16 peak as it stands, so a bf16 MFU above
 *             100% would be printed as measured (the step's products beat every probe), not
 *             turned into a new peak;
 *   REALPOS_PEAK_BF16_GFLOPS  fixes it (REALPOS_PEAK_GFLOPS is the fp32 peak's only).
 * An fp32 run never reads the bf16 peak or its cache, and a bf16 run never the sgemm one's. */
#pragma once
#include <stddef.h>

#include "core/gemm.h"

enum { PEAK_STARTUP_PROBES = 5, PEAK_SPREAD_PROBES = 8, PEAK_PROBE_MULTIPLE = 16 };

/* A cache entry is believed only up to what the CPU can do: the higher of peak_hardware_bound and
 * PEAK_PROBE_MULTIPLE x the run's best probe (a loaded machine's probes read low, by 10x in
 * issue 29's example, never high); a higher entry (1e30) is ignored with a note. A cache path that
 * is not a regular file (a FIFO) is ignored with a note, and the cache is off for the run. */
double peak_hardware_bound(int threads);

/* One timed sgemm (or bf16 pass) on the calling process's threads: GFLOP/s. Tests inject their own. */
typedef double (*PeakProbeFn)(void *ctx);

typedef struct {
    Precision precision;   /* of the products probed: the fp32 sgemm peak or the bf16 one */
    double gflops;         /* the peak now, of this process on `threads` threads */
    const char *source;    /* which source set it: "probe", "cache", "observed" (fp32 only) or the
                            * environment variable's name */
    int threads;
    int probes;            /* probes run by this process so far */
    double probe_gflops;   /* their best (0 when none ran) */
    double cached_gflops;  /* what the cache file holds (0: no cache or no entry yet) */
    char cached_at[32];    /* when the cache's best probe ran (UTC, ISO 8601) */
    int spread_left;       /* probes still to run at metrics records */
    char cache_path[4096]; /* "" when the cache is off */
    char cpu_model[256];
    char kernels[96];      /* what the probe runs on, the library's version included (an upgrade may be
                            * slower: its peak is not the old one's): OpenBLAS's core (fp32,
                            * peak_fp32_kernels); the engine and the shapes' tokens, hidden,
                            * intermediate (bf16) */
    PeakProbeFn probe;
    void *probe_ctx;
} PeakEstimate;

/* The peak at `threads` OpenMP threads from the probe, cache and environment above. Never fatal:
 * an unreadable or unwritable cache is logged once and the run goes on without it. */
PeakEstimate peak_estimate(int threads);
/* Fatal, naming the variable, unless REALPOS_PEAK_GFLOPS, REALPOS_PEAK_BF16_GFLOPS and
 * REALPOS_PEAK_CACHE are unset, empty or valid (a run checks them before it writes anything). */
void peak_check_environment(void);
/* The same with an injected probe and cache file (NULL: no cache), ignoring the environment. */
PeakEstimate peak_estimate_with(int threads, PeakProbeFn probe, void *probe_ctx, const char *cache_path);

/* The bf16 peak's probe: the products of a step's linear layers (gemm_bf16_shapes_gflops). */
enum { PEAK_BF16_MAX_SHAPES = 16, PEAK_BF16_MAX_TOKENS = 4096 };
typedef struct {
    GemmBackend backend;
    int tokens, hidden, intermediate; /* what the shapes were made of (the cache key's) */
    int count;
    GemmShape shapes[PEAK_BF16_MAX_SHAPES];
    float *borrowed; /* memory dead between steps the operands may use (gemm_bf16_shapes_gflops), or NULL */
    size_t borrowed_floats;
    size_t own_bytes_max; /* the most bytes of operands one of its probes allocated (0: all in `borrowed`) */
} PeakBf16Probe;
/* Into probe: the 12 products of an encoder layer's 4 linear maps (QKV H -> 3H, attention out
 * H -> H, FFN H -> I and I -> H) on T = min(tokens, PEAK_BF16_MAX_TOKENS) rows (the cap keeps
 * the operands each probe allocates bounded: ~300 MB uncapped at bert-base 32 x 512, 80 MB at
 * 4096 rows; that products of more rows run no faster is assumed, not measured), as
 * layers/linear.c runs them:
 *   forward  out [T,o] = in [T,i] W[o,i]^T        (N, T; beta 1 where a bias was copied in)
 *   d_in     d_in [T,i] = d_out [T,o] W [o,i]     (N, N; beta 0)
 *   dW       dW [o,i] += d_out^T [o,T] in [T,i]   (T, N; beta 1) */
void peak_bf16_encoder_shapes(PeakBf16Probe *probe, GemmBackend backend, int tokens, int hidden, int intermediate);
/* One bf16 probe (ctx: a PeakBf16Probe that outlives the estimate; its own_bytes_max updated). */
double bf16_probe_gflops(void *ctx);
/* The bf16 peak at `threads` threads: probe, its own cache, REALPOS_PEAK_BF16_GFLOPS,
 * REALPOS_PEAK_CACHE; never raised by a window. */
PeakEstimate peak_estimate_bf16(int threads, PeakBf16Probe *probe);
/* The same with an injected probe and cache file (NULL: no cache), ignoring the environment. */
PeakEstimate peak_estimate_bf16_with(int threads, PeakProbeFn probe, void *probe_ctx, const char *cache_path);
/* The cache file of a precision's peak at `threads` threads on this host (kernels: fp32's
 * peak_fp32_kernels; for bf16 the engine and the probe's shapes, "oneDNN-2.6.3-T4096xH256xI1024"); "" when
 * no absolute directory is known. */
void peak_cache_path(char *out, size_t size, Precision precision, const char *kernels, int threads);

/* Run one probe now; the peak and the cache take it if it is faster. Returns its GFLOP/s. */
double peak_probe(PeakEstimate *p);
/* At a metrics record: one of the spread probes, if any are left (outside the step's time; the
 * probe allocates and frees its 12 MB of operands, so it belongs between steps, never in one). */
void peak_refine(PeakEstimate *p);
/* achieved_gflops / peak. fp32: first raises the peak to achieved_gflops if it is faster (source
 * "observed"), so in [0, 1]; bf16: never raised, the ratio as measured. 0 when achieved is not
 * positive. */
double peak_utilisation(PeakEstimate *p, double achieved_gflops);
/* One line for logs: "fp32 sgemm: 186.2 GFLOP/s on 2 threads from the cache (best of 5 probes now
 * 101.3; cache 186.2 (probed 2026-12-01T09:41:00Z) in ~/.cache/...)" ("bf16 products: ..."). */
void peak_describe(const PeakEstimate *p, char *out, size_t size);

/* The default probe: one timed 1024^3 fp32 product, no warm-up (ctx unused), on the engine the
 * step's large fp32 products use: OpenBLAS's sgemm (its threads), or core/gemm_small's AVX-512
 * kernel where gemm_f32 takes it (gemm_f32_on_small, one block a thread). */
double sgemm_probe_gflops(void *ctx);

/* "model name" of /proc/cpuinfo into out (or "unknown"), and OpenBLAS's kernel family in use
 * (openblas_get_corename, e.g. "Haswell", "SkylakeX", "Prescott"). */
void cpu_model_name(char *out, size_t size);
const char *blas_core_name(void);
/* The fp32 peak's key: OpenBLAS's core and version, e.g. "SkylakeX-OpenBLAS-0.3.21", or
 * "gemm_small-AVX-512" where the probe runs on it. */
void peak_fp32_kernels(char *out, size_t size);
