#include "core/peak.h"

#include <cblas.h>
#include <stdlib.h>

#include "core/common.h"

double sgemm_peak_gflops(void) {
    const int n = 1536;
    size_t count = (size_t)n * n;
    float *a = xalloc_floats(count), *b = xalloc_floats(count), *c = xalloc_floats(count);
    for (size_t e = 0; e < count; e++) {
        a[e] = (float)(e % 7) * 0.1f;
        b[e] = (float)(e % 5) * 0.1f;
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) { /* the first call warms up caches and threads */
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double gflops = 2.0 * (double)n * n * n / (now_seconds() - t0) * 1e-9;
        if (rep > 0 && gflops > best)
            best = gflops;
    }
    free(a);
    free(b);
    free(c);
    return best;
}
