/* The peak of this machine from probes, the per-host cache and observed windows (peak.h). */
#include "train/loop/peak.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/atomic_file.h"
#include "core/io/files.h"
#include "core/io/paths.h"

enum { PROBE_N = 1024 };

double sgemm_probe_gflops(void *ctx) {
    (void)ctx;
    size_t count = (size_t)PROBE_N * PROBE_N;
    float *a = xalloc_floats_transient(count, "the peak probe"), *b = xalloc_floats_transient(count, "the peak probe"),
          *c = xalloc_floats_transient(count, "the peak probe");
    for (size_t e = 0; e < count; e++) { /* c too: its pages are faulted in before the timing */
        a[e] = (float)(e % 7) * 0.1f;
        b[e] = (float)(e % 5) * 0.1f;
        c[e] = 0.0f;
    }
    double t0 = now_seconds();
    if (gemm_f32_on_small(PROBE_N, PROBE_N, PROBE_N, 1.0f)) /* the engine the step's large products use */
        gemm_f32(GEMM_N, GEMM_T, PROBE_N, PROBE_N, PROBE_N, 1.0f, a, PROBE_N, b, PROBE_N, 0.0f, c, PROBE_N);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, PROBE_N, PROBE_N, PROBE_N, 1.0f, a, PROBE_N, b, PROBE_N,
                    0.0f, c, PROBE_N);
    double seconds = now_seconds() - t0;
    free(a);
    free(b);
    free(c);
    return 2.0 * PROBE_N * PROBE_N * (double)PROBE_N / (seconds > 0 ? seconds : 1e-9) * 1e-9;
}

/* ---- the cache: one JSON object per (precision, host, kernels, threads) file, CPU model inside ---- */

/* Characters outside [A-Za-z0-9._-] become '_'. */
static void file_name_safe(char *text) {
    for (char *c = text; *c; c++)
        if (!(*c == '.' || *c == '-' || *c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
              (*c >= 'A' && *c <= 'Z')))
            *c = '_';
}

/* $XDG_CACHE_HOME/realpos/peak-HOST-KERNELS-tTHREADS.json, or peak-bf16-HOST-KERNELS-tTHREADS.json
 * (HOME/.cache when XDG_CACHE_HOME is unset, empty or relative: the XDG spec says a relative path
 * is invalid and to be ignored); "" when neither gives an absolute directory. */
void peak_cache_path(char *out, size_t size, Precision precision, const char *kernels, int threads) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[3072];
    if (xdg && *xdg && *xdg != '/')
        rp_log("note: XDG_CACHE_HOME=%s is not an absolute path: ignored, as the XDG Base Directory spec "
               "says (the MFU peak cache goes to $HOME/.cache)", xdg);
    if (xdg && *xdg == '/')
        snprintf(dir, sizeof dir, "%s/realpos", xdg);
    else if (home && *home == '/')
        snprintf(dir, sizeof dir, "%s/.cache/realpos", home);
    else {
        out[0] = '\0';
        return;
    }
    char host[256] = "unknown", core[64];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    snprintf(core, sizeof core, "%s", kernels);
    file_name_safe(host);
    file_name_safe(core);
    snprintf(out, size, "%s/peak-%s%s-%s-t%d.json", dir, precision == PRECISION_BF16 ? "bf16-" : "", host, core,
             threads);
}

/* The field of a cache file naming the kernels (peak_fp32_kernels for fp32; a bf16 file's are its
 * engine and shapes); the fp32 field's name is the one older files have. */
static const char *kernels_field(const PeakEstimate *p) {
    return p->precision == PRECISION_BF16 ? "probed_on" : "openblas_core";
}

/* The cached best probe into p->cached_gflops / cached_at when the file exists, parses and names
 * the same precision, CPU model, kernels and thread count (a file without "precision" is fp32's,
 * as realpos wrote them before bf16 had a peak); otherwise 0 (a file that does not parse is
 * logged and will be replaced by the next probe). */
static void read_cache(PeakEstimate *p, int log_bad_file) {
    p->cached_gflops = 0;
    /* O_NONBLOCK: a FIFO at the path must not hold start-up (fstat then refuses anything but a
     * regular file) */
    int fd = open(p->cache_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return; /* no entry yet */
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rp_log("note: peak cache %s is not a regular file (%s): ignored, and the cache is off for this run",
               p->cache_path, S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory" : "a device or socket");
        close(fd);
        p->cache_path[0] = '\0';
        return;
    }
    char text[4096];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    text[got > 0 ? got : 0] = '\0';
    cJSON *o = cJSON_Parse(text);
    const cJSON *gflops = cJSON_GetObjectItemCaseSensitive(o, "gflops"),
                *cpu = cJSON_GetObjectItemCaseSensitive(o, "cpu_model"),
                *core = cJSON_GetObjectItemCaseSensitive(o, kernels_field(p)),
                *precision = cJSON_GetObjectItemCaseSensitive(o, "precision"),
                *threads = cJSON_GetObjectItemCaseSensitive(o, "threads"),
                *at = cJSON_GetObjectItemCaseSensitive(o, "probed_at");
    if (cJSON_IsString(precision) && strcmp(precision->valuestring, precision_names[p->precision])) {
        /* the other precision's entry: not this peak, replaced by the next probe */
    } else if (!cJSON_IsNumber(gflops) || !(gflops->valuedouble > 0) || !isfinite(gflops->valuedouble) ||
        !cJSON_IsString(cpu) || !cJSON_IsString(core) || !cJSON_IsNumber(threads) || !cJSON_IsString(at)) {
        if (log_bad_file)
            rp_log("note: peak cache %s is not a realpos peak record (expected gflops, cpu_model, %s, "
                   "threads, probed_at); ignoring it, the next probe replaces it", p->cache_path, kernels_field(p));
    } else if (!strcmp(cpu->valuestring, p->cpu_model) && !strcmp(core->valuestring, p->kernels) &&
               threads->valueint == p->threads &&
               (cJSON_IsString(precision) || (!precision && p->precision == PRECISION_FP32))) {
        p->cached_gflops = gflops->valuedouble;
        snprintf(p->cached_at, sizeof p->cached_at, "%s", at->valuestring);
    }
    cJSON_Delete(o);
}

/* Record `gflops` (a probe of now) as the cache's best. A cache that cannot be written turns the
 * cache off for this run, with one log line. */
static void write_cache(PeakEstimate *p, double gflops) {
    char dir[4096];
    path_directory(dir, sizeof dir, p->cache_path);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char at[32];
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "gflops", gflops);
    cJSON_AddStringToObject(o, "probed_at", at);
    cJSON_AddStringToObject(o, "cpu_model", p->cpu_model);
    cJSON_AddStringToObject(o, "precision", precision_names[p->precision]);
    cJSON_AddStringToObject(o, kernels_field(p), p->kernels);
    cJSON_AddNumberToObject(o, "threads", p->threads);
    cJSON_AddStringToObject(o, "probe",
                            p->precision == PRECISION_BF16
                                ? "best timed pass over a step's bf16 linear-layer products (realpos train/loop/peak.h)"
                                : "best timed 1024x1024x1024 cblas_sgemm (realpos core/peak.h)");
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    char why[3 * 4096] = "out of memory";
    int err = text ? mkdir_p_try(dir) : ENOMEM;
    if (err)
        snprintf(why, sizeof why, "%s: cannot create the directory: %s", dir, strerror(err));
    else {
        remove_stale_temp_files(dir); /* of writers killed mid-write */
        err = write_file_status(p->cache_path, text, strlen(text), why, sizeof why);
    }
    cJSON_free(text);
    if (err) {
        rp_log("note: cannot write the peak cache (%s); going on without it", why);
        p->cache_path[0] = '\0';
        return;
    }
    p->cached_gflops = gflops;
    snprintf(p->cached_at, sizeof p->cached_at, "%s", at);
}

/* ---- the estimate ---- */

/* The peak = max over the sources; `source` names the one that holds it. */
static void take_best(PeakEstimate *p) {
    if (p->probe_gflops > p->gflops) {
        p->gflops = p->probe_gflops;
        p->source = "probe";
    }
    if (p->cached_gflops > p->gflops) {
        p->gflops = p->cached_gflops;
        p->source = "cache";
    }
}

/* The most the CPU can do on `threads` threads, generously: cores x clock x fp32 FLOPs per cycle
 * of its widest vector unit with two FMA pipes (AVX-512: 2 x 16 x 2, AVX2/FMA: 2 x 8 x 2, AVX:
 * 16, else 8), the clock the highest of cpuinfo_max_freq and 1.5 x the "cpu MHz" seen (turbo
 * headroom; 6 GHz if neither is known). */
double peak_hardware_bound(int threads) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cores = cores < 1 ? 1 : cores;
    if (threads > 0 && threads < cores)
        cores = threads;
    double mhz = 0, per_cycle = 8;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    double khz;
    if (f && fscanf(f, "%lf", &khz) == 1 && khz > 0)
        mhz = khz / 1000;
    if (f)
        fclose(f);
    char line[8192];
    f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        double seen;
        if (!strncmp(line, "cpu MHz", 7) && sscanf(strchr(line, ':') ? strchr(line, ':') + 1 : "", "%lf", &seen) == 1 &&
            1.5 * seen > mhz)
            mhz = 1.5 * seen;
        if (!strncmp(line, "flags", 5)) {
            double here = strstr(line, " avx512f") ? 64 : strstr(line, " fma") && strstr(line, " avx2") ? 32
                        : strstr(line, " avx") ? 16 : 8;
            per_cycle = here > per_cycle ? here : per_cycle;
        }
    }
    if (f)
        fclose(f);
    if (!(mhz > 0))
        mhz = 6000;
    return (double)cores * mhz * 1e-3 * per_cycle;
}

/* A cached peak this machine cannot reach (above both the hardware bound and PEAK_PROBE_MULTIPLE
 * x this run's best probe, whichever is higher: the bound may misjudge a CPU, a probe never reads
 * high) is dropped, with a note; the next faster probe replaces it. */
static void drop_impossible_cache(PeakEstimate *p) {
    /* bf16: avx512_bf16's dot product does two multiply-adds per fp32 lane (AMX more: the
     * multiple of the best probe covers it) */
    double bound = peak_hardware_bound(p->threads) * (p->precision == PRECISION_BF16 ? 2 : 1),
           probed = PEAK_PROBE_MULTIPLE * p->probe_gflops;
    bound = probed > bound ? probed : bound;
    if (!(p->cached_gflops > bound))
        return;
    rp_log("note: peak cache %s holds %.4g GFLOP/s, more than this CPU can do in %s on %d threads (at most %.1f): "
           "ignored, the next probe replaces it", p->cache_path, p->cached_gflops, precision_names[p->precision],
           p->threads, bound);
    p->cached_gflops = 0;
    p->cached_at[0] = '\0';
}

/* One probe into probe_gflops (the cache not yet told). */
static double run_probe(PeakEstimate *p) {
    double gflops = p->probe(p->probe_ctx);
    p->probes++;
    if (gflops > p->probe_gflops)
        p->probe_gflops = gflops;
    return gflops;
}

/* The cache takes this run's best probe if it beats the file, read again first: another process
 * (another rank, another run) may have recorded a faster one since. */
static void update_cache(PeakEstimate *p) {
    if (!p->cache_path[0] || !(p->probe_gflops > p->cached_gflops))
        return;
    read_cache(p, 0);
    drop_impossible_cache(p);
    if (p->cache_path[0] && p->probe_gflops > p->cached_gflops)
        write_cache(p, p->probe_gflops);
}

double peak_probe(PeakEstimate *p) {
    double gflops = run_probe(p);
    update_cache(p);
    take_best(p);
    return gflops;
}

static PeakEstimate estimate_base(Precision precision, const char *kernels, int threads, PeakProbeFn probe,
                                  void *probe_ctx) {
    PeakEstimate p;
    memset(&p, 0, sizeof p);
    p.precision = precision;
    p.threads = threads;
    p.source = "probe";
    p.probe = probe;
    p.probe_ctx = probe_ctx;
    cpu_model_name(p.cpu_model, sizeof p.cpu_model);
    snprintf(p.kernels, sizeof p.kernels, "%s", kernels);
    return p;
}

static PeakEstimate estimate_with(Precision precision, const char *kernels, int threads, PeakProbeFn probe,
                                  void *probe_ctx, const char *cache_path) {
    PeakEstimate p = estimate_base(precision, kernels, threads, probe, probe_ctx);
    if (cache_path) {
        snprintf(p.cache_path, sizeof p.cache_path, "%s", cache_path);
        read_cache(&p, 1);
    }
    probe(probe_ctx); /* warm-up: OpenBLAS's threads and buffers */
    for (int i = 0; i < PEAK_STARTUP_PROBES; i++)
        run_probe(&p);
    drop_impossible_cache(&p);
    update_cache(&p);
    take_best(&p);
    p.spread_left = PEAK_SPREAD_PROBES;
    return p;
}

PeakEstimate peak_estimate_with(int threads, PeakProbeFn probe, void *probe_ctx, const char *cache_path) {
    char kernels[96];
    peak_fp32_kernels(kernels, sizeof kernels);
    return estimate_with(PRECISION_FP32, kernels, threads, probe, probe_ctx, cache_path);
}

PeakEstimate peak_estimate_bf16_with(int threads, PeakProbeFn probe, void *probe_ctx, const char *cache_path) {
    return estimate_with(PRECISION_BF16, "oneDNN", threads, probe, probe_ctx, cache_path);
}

/* The GFLOP/s the environment variable `name` fixes; 0 when it is unset or empty; fatal unless a
 * positive finite number. */
static double fixed_peak(const char *name) {
    const char *fixed = getenv(name);
    if (!fixed || !*fixed)
        return 0;
    double gflops = 0;
    RP_CHECK(parse_decimal(fixed, &gflops) && gflops > 0, "%s: expected a positive decimal number of GFLOP/s, got '%s'",
             name, fixed);
    return gflops;
}

void peak_check_environment(void) {
    fixed_peak("REALPOS_PEAK_GFLOPS");
    fixed_peak("REALPOS_PEAK_BF16_GFLOPS");
    env_switch("REALPOS_PEAK_CACHE", 1);
}

/* The environment's peak: fixed by `fixed_name` (REALPOS_PEAK_GFLOPS or REALPOS_PEAK_BF16_GFLOPS),
 * or probed with the cache unless REALPOS_PEAK_CACHE=off. */
static PeakEstimate estimate_from_environment(Precision precision, const char *fixed_name, const char *kernels,
                                              int threads, PeakProbeFn probe, void *probe_ctx) {
    double gflops = fixed_peak(fixed_name);
    if (gflops > 0) {
        PeakEstimate p = estimate_base(precision, kernels, threads, probe, probe_ctx);
        p.gflops = gflops;
        p.source = fixed_name;
        return p;
    }
    char path[4096] = "";
    if (env_switch("REALPOS_PEAK_CACHE", 1))
        peak_cache_path(path, sizeof path, precision, kernels, threads);
    return estimate_with(precision, kernels, threads, probe, probe_ctx, path[0] ? path : NULL);
}

PeakEstimate peak_estimate(int threads) {
    char kernels[96];
    peak_fp32_kernels(kernels, sizeof kernels);
    return estimate_from_environment(PRECISION_FP32, "REALPOS_PEAK_GFLOPS", kernels, threads, sgemm_probe_gflops,
                                     NULL);
}

/* ---- the bf16 peak's probe ---- */

void peak_bf16_encoder_shapes(PeakBf16Probe *probe, GemmBackend backend, int tokens, int hidden, int intermediate) {
    const int H = hidden, T = tokens < PEAK_BF16_MAX_TOKENS ? tokens : PEAK_BF16_MAX_TOKENS;
    const int maps[4][3] = {{H, 3 * H, 1}, {H, H, 0}, {H, intermediate, 1}, {intermediate, H, 1}};
    memset(probe, 0, sizeof *probe);
    probe->backend = backend;
    probe->tokens = T, probe->hidden = H, probe->intermediate = intermediate;
    for (int m = 0; m < 4; m++) { /* {in i, out o, bias} */
        const int i = maps[m][0], o = maps[m][1];
        probe->shapes[probe->count++] = (GemmShape){GEMM_N, GEMM_T, T, o, i, (float)maps[m][2]};
        probe->shapes[probe->count++] = (GemmShape){GEMM_N, GEMM_N, T, i, o, 0.0f};
        probe->shapes[probe->count++] = (GemmShape){GEMM_T, GEMM_N, o, i, T, 1.0f};
    }
}

double bf16_probe_gflops(void *ctx) {
    PeakBf16Probe *probe = ctx;
    size_t own_bytes = 0;
    const double gflops = gemm_bf16_shapes_gflops(probe->backend, probe->shapes, probe->count, probe->borrowed,
                                                  probe->borrowed_floats, &own_bytes);
    if (own_bytes > probe->own_bytes_max)
        probe->own_bytes_max = own_bytes;
    return gflops;
}

PeakEstimate peak_estimate_bf16(int threads, PeakBf16Probe *probe) {
    char engine[64], kernels[96];
    gemm_engine_version(PRECISION_BF16, probe->backend, engine, sizeof engine);
    snprintf(kernels, sizeof kernels, "%s-T%dxH%dxI%d", engine, probe->tokens, probe->hidden, probe->intermediate);
    return estimate_from_environment(PRECISION_BF16, "REALPOS_PEAK_BF16_GFLOPS", kernels, threads, bf16_probe_gflops,
                                     probe);
}

void peak_refine(PeakEstimate *p) {
    if (p->spread_left <= 0)
        return;
    p->spread_left--;
    peak_probe(p);
}

double peak_utilisation(PeakEstimate *p, double achieved_gflops) {
    if (!(achieved_gflops > 0))
        return 0.0;
    if (p->precision == PRECISION_FP32 && achieved_gflops > p->gflops) {
        if (strcmp(p->source, "observed"))
            rp_log("MFU peak raised from %.1f to %.1f GFLOP/s: a metrics window ran faster than every sgemm probe "
                   "(source now \"observed\")", p->gflops, achieved_gflops);
        p->gflops = achieved_gflops;
        p->source = "observed";
    }
    return achieved_gflops / p->gflops;
}

void peak_describe(const PeakEstimate *p, char *out, size_t size) {
    char cache[4200], probes[96] = "";
    const char *what = p->precision == PRECISION_BF16 ? "bf16 products" : "fp32 sgemm";
    if (!strncmp(p->source, "REALPOS_", 8)) {
        snprintf(out, size, "%s: %.1f GFLOP/s on %d threads, set by %s (no probe, no cache)", what, p->gflops,
                 p->threads, p->source);
        return;
    }
    if (!p->cache_path[0])
        snprintf(cache, sizeof cache, "cache off");
    else if (p->cached_gflops > 0)
        snprintf(cache, sizeof cache, "cache %.1f (probed %s) in %s", p->cached_gflops, p->cached_at, p->cache_path);
    else
        snprintf(cache, sizeof cache, "cache empty: %s", p->cache_path);
    if (p->probes)
        snprintf(probes, sizeof probes, "best of %d probes now %.1f", p->probes, p->probe_gflops);
    snprintf(out, size, "%s: %.1f GFLOP/s on %d threads from the %s (%s; %s)", what, p->gflops, p->threads,
             p->source, probes[0] ? probes : "no probe", cache);
}

void cpu_model_name(char *out, size_t size) {
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            snprintf(out, size, "%s", colon);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

const char *blas_core_name(void) { return openblas_get_corename(); }

void peak_fp32_kernels(char *out, size_t size) {
    if (gemm_f32_on_small(PROBE_N, PROBE_N, PROBE_N, 1.0f)) {
        snprintf(out, size, "gemm_small-AVX-512");
        return;
    }
    char engine[64];
    gemm_engine_version(PRECISION_FP32, GEMM_BF16_ONEDNN, engine, sizeof engine);
    snprintf(out, size, "%s-%s", blas_core_name(), engine);
}
