/* Thread CPU time of one encoder layer's forward and backward (layers/encoder_layer.c) at a given
 * shape, for comparing library versions side by side (scripts/dev/profile_layer.sh). Random
 * weights and inputs, dropout 0.1, every buffer allocated once outside the timed calls.
 * Usage: profile_layer B L H HEADS FFN MODE K RESIDUAL THREADS REPS
 * Prints: "forward MIN MEDIAN" and "backward MIN MEDIAN" in ms (the first call not counted). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/encoder.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, Rng *rng, float lo, float hi) {
    float *x = xalloc_floats(n ? n : 1);
    for (size_t e = 0; e < n; e++)
        x[e] = lo + (hi - lo) * rng_uniform(rng);
    return x;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, by_value);
    printf("%s %.3f %.3f\n", what, 1000 * t[0], 1000 * t[n / 2]);
}

int main(int argc, char **argv) {
    RP_CHECK(argc == 11, "usage: profile_layer B L H HEADS FFN MODE K RESIDUAL THREADS REPS");
    const int B = atoi(argv[1]), L = atoi(argv[2]), H = atoi(argv[3]), heads = atoi(argv[4]);
    const int I = atoi(argv[5]), rel_k = atoi(argv[7]), residual = atoi(argv[8]);
    const int threads = atoi(argv[9]), reps = atoi(argv[10]), N = B * L, d = H / heads;
    RelKind rel = (RelKind)0;
    for (int r = 0; rel_kind_names[r]; r++)
        if (strcmp(rel_kind_names[r], argv[6]) == 0)
            rel = (RelKind)r;
    RP_CHECK(B > 0 && L > 0 && heads > 0 && H % heads == 0 && reps > 1 && threads > 0,
             "profile_layer: bad arguments");
    omp_set_num_threads(threads);
    Rng rng;
    rng_seed(&rng, 7);
    const size_t scores = (size_t)B * heads * L * L, NH = (size_t)N * H, NI = (size_t)N * I;
    const size_t table = (size_t)attention_table_rows(rel, rel_k) * attention_table_cols(rel, d);
    LayerParams p = {filled(3 * H * H, &rng, -0.05f, 0.05f), filled(3 * H, &rng, -0.1f, 0.1f),
                     rel ? filled(table, &rng, -0.1f, 0.1f) : NULL, filled(H * H, &rng, -0.05f, 0.05f),
                     filled(H, &rng, -0.1f, 0.1f), filled(H, &rng, 0.9f, 1.1f), filled(H, &rng, -0.1f, 0.1f),
                     filled(NI / N * H, &rng, -0.05f, 0.05f), filled(I, &rng, -0.1f, 0.1f),
                     filled(NI / N * H, &rng, -0.05f, 0.05f), filled(H, &rng, -0.1f, 0.1f),
                     filled(H, &rng, 0.9f, 1.1f), filled(H, &rng, -0.1f, 0.1f)};
    LayerParams g = {filled(3 * H * H, &rng, 0, 0), filled(3 * H, &rng, 0, 0),
                     rel ? filled(table, &rng, 0, 0) : NULL, filled(H * H, &rng, 0, 0),
                     filled(H, &rng, 0, 0), filled(H, &rng, 0, 0), filled(H, &rng, 0, 0),
                     filled(NI / N * H, &rng, 0, 0), filled(I, &rng, 0, 0),
                     filled(NI / N * H, &rng, 0, 0), filled(H, &rng, 0, 0), filled(H, &rng, 0, 0),
                     filled(H, &rng, 0, 0)};
    const int scalar = pos_scheme(rel)->qk == POS_QK_RAW; /* keeps raw scores */
    LayerActs a = {filled(NH, &rng, 0, 0), filled(N, &rng, 0, 0), filled(N, &rng, 0, 0),
                   filled(3 * NH, &rng, 0, 0), filled(scores, &rng, 0, 0),
                   scalar ? filled(scores, &rng, 0, 0) : NULL, filled(NH, &rng, 0, 0),
                   filled(NH, &rng, 0, 0), filled(NH, &rng, 0, 0), filled(N, &rng, 0, 0),
                   filled(N, &rng, 0, 0), filled(NI, &rng, 0, 0), filled(NI, &rng, 0, 0),
                   filled(NH, &rng, 0, 0)};
    const LayerShape shape = {
        .N = N, .H = H, .ffn_dim = I, .pre_norm = 0, .eps = 1e-12f, .hidden_dropout = 0.1f,
        .attn = {.B = B, .L = L, .H = H, .num_heads = heads, .rel = rel, .rel_k = rel_k,
                 .residual = residual, .first_layer = 0, .carried_scale = 1.0f, .dropout = 0.1f,
                 .threads = threads}};
    LayerScratch s = {filled(NH, &rng, 0, 0), filled(NH, &rng, 0, 0), filled(NH, &rng, 0, 0),
                      filled(NI, &rng, 0, 0), filled(3 * NH, &rng, 0, 0), filled(NH, &rng, 0, 0),
                      filled(attention_scratch_floats(&shape.attn), &rng, 0, 0),
                      residual ? filled(scores, &rng, 0, 0) : NULL,
                      residual ? filled(scores, &rng, 0, 0) : NULL};
    float *x = filled(NH, &rng, -1, 1), *d_out = filled(NH, &rng, -1, 1), *d_x = filled(NH, &rng, 0, 0);
    float *d_copy = filled(NH, &rng, 0, 0);
    int *mask = xmalloc(sizeof(int) * (size_t)N);
    for (int n = 0; n < N; n++)
        mask[n] = 1;
    const LayerKeys keys = {11, 12, 13};
    double *fwd = xmalloc(sizeof(double) * (size_t)reps), *bwd = xmalloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r <= reps; r++) {
        memcpy(d_copy, d_out, NH * sizeof(float));
        const double t0 = cpu_now();
        encoder_layer_forward(&a, &s, x, &p, mask, &shape, keys);
        const double t1 = cpu_now();
        encoder_layer_backward(d_x, d_copy, &g, &s, x, &a, &p, &shape, keys);
        const double t2 = cpu_now();
        if (r > 0)
            fwd[r - 1] = t1 - t0, bwd[r - 1] = t2 - t1;
    }
    report("forward", fwd, reps);
    report("backward", bwd, reps);
    return 0;
}
