#include "core/peak.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

enum { PROBE_N = 1024 };

static double timed_sgemm(const float *a, const float *b, float *c) {
    double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, PROBE_N, PROBE_N, PROBE_N, 1.0f, a, PROBE_N,
                b, PROBE_N, 0.0f, c, PROBE_N);
    double seconds = now_seconds() - t0;
    return 2.0 * PROBE_N * PROBE_N * (double)PROBE_N / (seconds > 0 ? seconds : 1e-9) * 1e-9;
}

/* Best GFLOP/s of `probes` timed calls after `warmups` untimed ones. */
static double best_of(int warmups, int probes) {
    size_t count = (size_t)PROBE_N * PROBE_N;
    float *a = xalloc_floats(count), *b = xalloc_floats(count), *c = xalloc_floats(count);
    for (size_t e = 0; e < count; e++) {
        a[e] = (float)(e % 7) * 0.1f;
        b[e] = (float)(e % 5) * 0.1f;
    }
    double best = 0;
    for (int rep = 0; rep < warmups + probes; rep++) {
        double gflops = timed_sgemm(a, b, c);
        if (rep >= warmups && gflops > best)
            best = gflops;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

double sgemm_probe_gflops(void) { return best_of(0, 1); }

double sgemm_peak_gflops_best(int probes) { return best_of(1, probes > 0 ? probes : 1); }

double sgemm_peak_gflops(void) { return sgemm_peak_gflops_best(5); }

double peak_fraction(double achieved, double peak) {
    if (!(peak > 0) || !(achieved > 0))
        return 0.0;
    return achieved >= peak ? 1.0 : achieved / peak;
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
