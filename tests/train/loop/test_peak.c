/* The MFU peak (train/loop/peak.h) with a scripted probe: a slow start-up probe no longer pins MFU at
 * 100% (the spread probes, the cache and an observed window each lift the peak), MFU never
 * exceeds 1, the cache is keyed, survives a bad file and an unwritable directory, and the
 * environment's REALPOS_PEAK_GFLOPS / REALPOS_PEAK_CACHE do what peak.h says. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "train/loop/peak.h"
#include "tests/check.h"

/* Returns values[0], values[1], ... and then the last value forever; counts its calls. */
typedef struct {
    const double *values;
    int n, calls;
} Script;

static double scripted(void *ctx) {
    Script *s = ctx;
    int i = s->calls < s->n ? s->calls : s->n - 1;
    s->calls++;
    return s->values[i];
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    RP_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "%s: cannot write", path);
}

int main(void) {
    TestTally t = {0, 0};
    char dir[] = "/tmp/realpos-peak.XXXXXX";
    RP_CHECK(mkdtemp(dir), "mkdtemp failed");
    char cache[256];
    snprintf(cache, sizeof cache, "%s/sub/peak.json", dir);

    /* The run: every start-up probe lands in a slow moment (10 GFLOP/s), the machine does
     * 100, the step 60. The old clamp printed min(60 / 10, 1) = 100% for the whole run. */
    const double slow_then_quiet[] = {10, 10, 10, 10, 10, 10, 100};
    Script s = {slow_then_quiet, 7, 0};
    PeakEstimate p = peak_estimate_with(2, scripted, &s, NULL);
    CHECK(&t, s.calls == 1 + PEAK_STARTUP_PROBES && p.probes == PEAK_STARTUP_PROBES && near(p.gflops, 10),
          "start-up: one warm-up and %d probes, peak their best (%d calls, peak %.1f)", PEAK_STARTUP_PROBES, s.calls,
          p.gflops);
    peak_refine(&p);
    double mfu = peak_utilisation(&p, 60);
    CHECK(&t, near(mfu, 0.6) && near(p.gflops, 100) && !strcmp(p.source, "probe"),
          "slow start-up probes: the first spread probe lifts the peak to 100, MFU 60%% not 100%% (MFU %.3f, peak %.1f "
          "from %s)", mfu, p.gflops, p.source);
    for (int record = 1; record < PEAK_SPREAD_PROBES + 3; record++)
        peak_refine(&p);
    CHECK(&t, p.probes == PEAK_STARTUP_PROBES + PEAK_SPREAD_PROBES && p.spread_left == 0,
          "spread probes: exactly %d at the first metrics records, then none (%d probes)", PEAK_SPREAD_PROBES, p.probes);

    /* Probes that never see the machine's rate: a faster window raises the peak, MFU <= 1. */
    const double always_slow[] = {10};
    Script slow = {always_slow, 1, 0};
    p = peak_estimate_with(2, scripted, &slow, NULL);
    peak_refine(&p);
    double first = peak_utilisation(&p, 60);
    CHECK(&t, near(first, 1.0) && near(p.gflops, 60) && !strcmp(p.source, "observed"),
          "a window faster than every probe raises the peak to it (source observed): MFU %.3f, peak %.1f from %s", first,
          p.gflops, p.source);
    double second = peak_utilisation(&p, 30);
    CHECK(&t, near(second, 0.5), "... and the next, slower window reads against the raised peak (MFU %.3f)", second);
    int bounded = 1;
    for (double achieved = 1; achieved < 1000; achieved *= 1.7)
        bounded &= peak_utilisation(&p, achieved) <= 1.0 && p.gflops >= achieved;
    CHECK(&t, bounded && peak_utilisation(&p, 0) == 0.0 && peak_utilisation(&p, -5) == 0.0,
          "MFU is in [0, 1] for any achieved rate, 0 for none");

    /* The cache: a quiet run records 100; a later run whose probes are all slow starts from it. */
    const double quiet[] = {100};
    Script q = {quiet, 1, 0};
    p = peak_estimate_with(2, scripted, &q, cache);
    CHECK(&t, near(p.cached_gflops, 100) && access(cache, R_OK) == 0 && !strcmp(p.source, "probe"),
          "a run writes its best probe to the cache, creating its directory (cached %.1f)", p.cached_gflops);
    Script s2 = {always_slow, 1, 0};
    p = peak_estimate_with(2, scripted, &s2, cache);
    mfu = peak_utilisation(&p, 60);
    CHECK(&t, near(p.gflops, 100) && !strcmp(p.source, "cache") && near(mfu, 0.6),
          "slow probes, cached 100: the peak comes from the cache at once, MFU 60%% (MFU %.3f, %s)", mfu, p.source);
    char line[8192];
    peak_describe(&p, line, sizeof line);
    CHECK(&t, strstr(line, "100.0 GFLOP/s on 2 threads from the cache") && strstr(line, cache) &&
                  strstr(line, "best of 5 probes now 10.0"),
          "the description names the peak, its source, the cache file and this run's probes: %s", line);
    const double faster[] = {120};
    Script f = {faster, 1, 0};
    p = peak_estimate_with(2, scripted, &f, cache);
    size_t len;
    char *text = read_file(cache, &len, "peak cache");
    CHECK(&t, strstr(text, "\"gflops\":\t120") && strstr(text, "\"threads\":\t2"),
          "a faster probe replaces the cached best: %s", text);
    free(text);

    /* Keyed: an entry of another thread count (or CPU, or kernel family) is not this one's. */
    Script s3 = {always_slow, 1, 0};
    p = peak_estimate_with(1, scripted, &s3, cache);
    CHECK(&t, near(p.gflops, 10) && !strcmp(p.source, "probe"),
          "an entry of 2 threads is not used at 1 thread (peak %.1f from %s)", p.gflops, p.source);
    write_text(cache, "{\"gflops\": 500, \"probed_at\": \"x\", \"cpu_model\": \"another CPU\", \"openblas_core\": "
                      "\"Haswell\", \"threads\": 2}");
    Script s4 = {always_slow, 1, 0};
    p = peak_estimate_with(2, scripted, &s4, cache);
    CHECK(&t, near(p.gflops, 10), "an entry of another CPU model is not used (peak %.1f)", p.gflops);
    /* ... nor one of another OpenBLAS version (an upgrade may be slower) or of the key before it
     * had the version; the key names the library as loaded */
    char model[256], fp32_kernels[96], version[32] = "", other[1024];
    cpu_model_name(model, sizeof model);
    peak_fp32_kernels(fp32_kernels, sizeof fp32_kernels);
    sscanf(openblas_get_config(), "OpenBLAS %31s", version);
    const char *other_keys[2] = {"-OpenBLAS-0.0.1", ""};
    for (int k = 0; k < 2; k++) {
        snprintf(other, sizeof other, "{\"gflops\": 50, \"probed_at\": \"x\", \"cpu_model\": \"%s\", "
                 "\"openblas_core\": \"%s%s\", \"threads\": 2}", model, blas_core_name(), other_keys[k]);
        write_text(cache, other);
        Script s_other = {always_slow, 1, 0};
        p = peak_estimate_with(2, scripted, &s_other, cache);
        CHECK(&t, near(p.gflops, 10) && !strcmp(p.kernels, fp32_kernels),
              "an entry keyed %s%s is not this library's (%s): peak %.1f", blas_core_name(), other_keys[k], p.kernels,
              p.gflops);
    }
    char want_key[96];
    const int on_small = gemm_f32_on_small(1024, 1024, 1024, 1.0f);
    if (on_small)
        snprintf(want_key, sizeof want_key, "gemm_small-AVX-512");
    else
        snprintf(want_key, sizeof want_key, "%s-OpenBLAS-%s", blas_core_name(), version);
    CHECK(&t, version[0] && !strcmp(fp32_kernels, want_key),
          "the fp32 key names the probe's engine: %s (%s; 1024^3 on gemm_small: %d)", fp32_kernels,
          openblas_get_config(), on_small);

    /* Impossible entries are not believed: 1e30 GFLOP/s for this very key is dropped (the probe's
     * peak, not MFU 1e-29), and the next probe replaces it; a plausible one is kept. */
    char entry[1024];
    snprintf(entry, sizeof entry, "{\"gflops\": 1e30, \"probed_at\": \"x\", \"cpu_model\": \"%s\", "
             "\"openblas_core\": \"%s\", \"threads\": 2}", model, fp32_kernels);
    write_text(cache, entry);
    Script s7 = {always_slow, 1, 0};
    p = peak_estimate_with(2, scripted, &s7, cache);
    text = read_file(cache, &len, "peak cache");
    CHECK(&t, near(p.gflops, 10) && !strcmp(p.source, "probe") && near(peak_utilisation(&p, 5), 0.5) &&
                  strstr(text, "\"gflops\":\t10"),
          "a cached 1e30 GFLOP/s (above %.0f, the most this CPU can do) is ignored and replaced: peak %.1f from %s",
          peak_hardware_bound(2), p.gflops, p.source);
    free(text);
    double bound = peak_hardware_bound(2);
    CHECK(&t, bound > 0 && isfinite(bound) && peak_hardware_bound(1) <= bound,
          "the hardware bound is finite and grows with the threads (%.1f at 1, %.1f at 2)", peak_hardware_bound(1),
          bound);
    /* A FIFO as the cache file: ignored at once (no reader waits on it), the cache off. */
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo.json", dir);
    RP_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo failed");
    Script s8 = {quiet, 1, 0};
    p = peak_estimate_with(2, scripted, &s8, fifo);
    struct stat st;
    CHECK(&t, near(p.gflops, 100) && p.cache_path[0] == '\0' && stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode),
          "a FIFO as the cache is ignored without blocking, the cache off, the FIFO left alone");

    /* Broken caches never stop a run. */
    write_text(cache, "not json {");
    Script s5 = {quiet, 1, 0};
    p = peak_estimate_with(2, scripted, &s5, cache);
    text = read_file(cache, &len, "peak cache");
    CHECK(&t, near(p.gflops, 100) && strstr(text, "\"gflops\":\t100"), "a file that does not parse is replaced");
    free(text);
    char blocked[300];
    snprintf(blocked, sizeof blocked, "%s/sub/peak.json/below/peak.json", dir); /* a file where a directory must be */
    Script s6 = {quiet, 1, 0};
    p = peak_estimate_with(2, scripted, &s6, blocked);
    CHECK(&t, near(p.gflops, 100) && p.cache_path[0] == '\0',
          "an unwritable cache turns the cache off, the run goes on (peak %.1f)", p.gflops);

    /* The bf16 peak (issue 37): never raised by a window, and its cache entry is not the fp32
     * one's nor the reverse, even in one file. */
    Script b1 = {slow_then_quiet, 1, 0};
    p = peak_estimate_bf16_with(2, scripted, &b1, NULL);
    mfu = peak_utilisation(&p, 60);
    CHECK(&t, p.precision == PRECISION_BF16 && near(mfu, 6.0) && near(p.gflops, 10) && !strcmp(p.source, "probe"),
          "bf16: a window faster than every probe is divided as measured, the peak not raised (MFU %.3f, peak %.1f "
          "from %s)", mfu, p.gflops, p.source);
    peak_describe(&p, line, sizeof line);
    CHECK(&t, !strncmp(line, "bf16 products: 10.0 GFLOP/s ", 28), "bf16: the description says which peak: %s", line);
    char shared[300];
    snprintf(shared, sizeof shared, "%s/shared.json", dir);
    Script f100 = {quiet, 1, 0}, b10 = {slow_then_quiet, 1, 0};
    p = peak_estimate_with(2, scripted, &f100, shared); /* fp32 records 100 */
    p = peak_estimate_bf16_with(2, scripted, &b10, shared);
    CHECK(&t, near(p.gflops, 10) && !strcmp(p.source, "probe"),
          "a bf16 estimate does not read an fp32 entry (peak %.1f from %s)", p.gflops, p.source);
    text = read_file(shared, &len, "peak cache");
    CHECK(&t, strstr(text, "\"precision\":\t\"bf16\"") && strstr(text, "\"probed_on\""),
          "... and records its own, with its precision and engine: %s", text);
    free(text);
    Script b100 = {quiet, 1, 0}, f10 = {slow_then_quiet, 1, 0};
    p = peak_estimate_bf16_with(2, scripted, &b100, shared); /* bf16 records 100 over its 10 */
    p = peak_estimate_with(2, scripted, &f10, shared);
    CHECK(&t, near(p.gflops, 10) && !strcmp(p.source, "probe"),
          "an fp32 estimate does not read a bf16 entry (peak %.1f from %s)", p.gflops, p.source);
    PeakBf16Probe shapes;
    peak_bf16_encoder_shapes(&shapes, GEMM_BF16_ONEDNN, 32 * 128, 256, 1024); /* bert-mini 32 x 128 */
    int as_the_step = shapes.count == 12;
    for (int k = 0; k < shapes.count; k++) { /* the QKV map's: forward, d_in, dW */
        const GemmShape *x = &shapes.shapes[k], want[3] = {{GEMM_N, GEMM_T, 4096, 768, 256, 1.0f},
                                                           {GEMM_N, GEMM_N, 4096, 256, 768, 0.0f},
                                                           {GEMM_T, GEMM_N, 768, 256, 4096, 1.0f}};
        as_the_step &= k >= 3 || !memcmp(x, &want[k], sizeof *x);
    }
    peak_bf16_encoder_shapes(&shapes, GEMM_BF16_ONEDNN, 32 * 512, 768, 3072); /* bert-base 32 x 512 */
    CHECK(&t, as_the_step && shapes.shapes[0].M == PEAK_BF16_MAX_TOKENS && shapes.shapes[2].K == PEAK_BF16_MAX_TOKENS,
          "the bf16 probe's products: the linear layers' 12, as layers/linear.c runs them, at most %d rows",
          PEAK_BF16_MAX_TOKENS);
    char fp32_path[4096], bf16_path[4096];
    peak_cache_path(fp32_path, sizeof fp32_path, PRECISION_FP32, fp32_kernels, 2);
    peak_cache_path(bf16_path, sizeof bf16_path, PRECISION_BF16, "oneDNN-T4096xH256xI1024", 2);
    CHECK(&t, fp32_path[0] && bf16_path[0] && strcmp(fp32_path, bf16_path) && strstr(bf16_path, "/peak-bf16-") &&
                  !strstr(fp32_path, "/peak-bf16-"),
          "the two precisions' default cache files differ: %s, %s", fp32_path, bf16_path);

    /* The environment (the real probe: a few 1024^3 sgemm). */
    setenv("XDG_CACHE_HOME", dir, 1);
    setenv("REALPOS_PEAK_GFLOPS", "42.5", 1);
    p = peak_estimate(1);
    CHECK(&t, near(p.gflops, 42.5) && !strcmp(p.source, "REALPOS_PEAK_GFLOPS") && p.probes == 0,
          "REALPOS_PEAK_GFLOPS fixes the starting peak, no probe (peak %.1f from %s, %d probes)", p.gflops, p.source,
          p.probes);
    /* the bf16 peak: its own variable; REALPOS_PEAK_GFLOPS (still set) is the fp32 peak's only (the
     * real probe: a tiny encoder's products, emulated when the CPU has no bf16) */
    CpuBf16 cpu = cpu_bf16_query();
    PeakBf16Probe tiny;
    peak_bf16_encoder_shapes(&tiny, cpu_bf16_available(&cpu) ? GEMM_BF16_ONEDNN : GEMM_BF16_EMULATED, 8, 16, 32);
    setenv("REALPOS_PEAK_CACHE", "off", 1);
    p = peak_estimate_bf16(1, &tiny);
    CHECK(&t, p.precision == PRECISION_BF16 && !strcmp(p.source, "probe") && p.probes == PEAK_STARTUP_PROBES &&
                  p.gflops > 0,
          "REALPOS_PEAK_GFLOPS does not fix the bf16 peak: probed (peak %.3f from %s, %d probes)", p.gflops, p.source,
          p.probes);
    int major = 0, minor = 0, patch = 0, tail = 0;
    const int onednn = sscanf(p.kernels, "oneDNN-%d.%d.%d-T8xH16xI32%n", &major, &minor, &patch, &tail) == 3;
    CHECK(&t, cpu_bf16_available(&cpu) ? onednn && major >= 2 && !p.kernels[tail]
                                       : !strcmp(p.kernels, "emulated-T8xH16xI32"),
          "the bf16 key names the engine's version and the shapes: %s", p.kernels);
    setenv("REALPOS_PEAK_BF16_GFLOPS", "7", 1);
    p = peak_estimate_bf16(1, &tiny);
    CHECK(&t, near(p.gflops, 7) && !strcmp(p.source, "REALPOS_PEAK_BF16_GFLOPS") && p.probes == 0 &&
                  near(peak_utilisation(&p, 70), 10) && near(p.gflops, 7),
          "REALPOS_PEAK_BF16_GFLOPS fixes the bf16 peak, no probe, no window raises it (peak %.1f from %s)", p.gflops,
          p.source);
    unsetenv("REALPOS_PEAK_GFLOPS");
    p = peak_estimate(1);
    CHECK(&t, p.precision == PRECISION_FP32 && strcmp(p.source, "REALPOS_PEAK_BF16_GFLOPS") && p.probes > 0,
          "... and not the fp32 one (peak %.1f from %s)", p.gflops, p.source);
    unsetenv("REALPOS_PEAK_BF16_GFLOPS");
    p = peak_estimate(1);
    char expected[512];
    snprintf(expected, sizeof expected, "%s/realpos", dir);
    CHECK(&t, p.gflops > 0 && p.cache_path[0] == '\0' && access(expected, F_OK) != 0,
          "REALPOS_PEAK_CACHE=off: probes only, nothing written (peak %.1f)", p.gflops);
    unsetenv("REALPOS_PEAK_CACHE");
    p = peak_estimate(1);
    CHECK(&t, p.gflops > 0 && !strncmp(p.cache_path, expected, strlen(expected)) && strstr(p.cache_path, "-t1.json") &&
                  access(p.cache_path, R_OK) == 0,
          "the default cache lives in $XDG_CACHE_HOME/realpos/, keyed by thread count: %s", p.cache_path);
    unlink(p.cache_path);
    rmdir(expected);
    /* A relative XDG_CACHE_HOME is ignored (the XDG spec): $HOME/.cache, nothing in the cwd. */
    char home[300], cwd[4096];
    snprintf(home, sizeof home, "%s/home", dir);
    RP_CHECK(mkdir(home, 0700) == 0 && getcwd(cwd, sizeof cwd) && chdir(dir) == 0, "cannot set up %s", home);
    setenv("HOME", home, 1);
    setenv("XDG_CACHE_HOME", "relcache", 1);
    p = peak_estimate(1);
    snprintf(expected, sizeof expected, "%s/.cache/realpos/", home);
    CHECK(&t, access("relcache", F_OK) != 0 && !strncmp(p.cache_path, expected, strlen(expected)),
          "XDG_CACHE_HOME=relcache (relative) is ignored: the cache is %s, no ./relcache", p.cache_path);
    RP_CHECK(chdir(cwd) == 0, "cannot return to %s", cwd);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(&t, system(cmd) == 0, "scratch directory removed");
    return tally_exit(&t);
}
