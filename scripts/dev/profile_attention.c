/* Per-phase CPU profile of one attention op (forward + backward), single thread, for
 * scripts/dev/profile_attention.sh. cblas_sgemm is interposed: every call's thread CPU time and flops
 * are summed per call site (return address; the script maps sites to functions with addr2line),
 * so the GEMMs of the core and of the relative terms are told apart even though OpenBLAS's
 * kernels cannot be unwound by perf. The rest of each pass (gather/scatter, softmax, carried
 * scores, dropout) is the pass time minus its GEMM time.
 * Usage: profile_attention B L H HEADS MODE K RESIDUAL REPS OUT.txt
 * OUT.txt: "pass forward|backward SECONDS" lines, then "site ADDRESS SECONDS FLOPS CALLS". */
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "layers/attention.h"

typedef void (*SgemmFn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                        const blasint, const blasint, const blasint, const float, const float *, const blasint,
                        const float *, const blasint, const float, float *, const blasint);

enum { MAX_SITES = 64 };
typedef struct {
    void *address[MAX_SITES];
    double seconds[MAX_SITES], flops[MAX_SITES];
    long calls[MAX_SITES];
    int count, on;
} Sites;
static Sites sites; /* profiling harness only (single-threaded run) */

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                 const blasint lda, const float *B, const blasint ldb, const float beta, float *C,
                 const blasint ldc) {
    static SgemmFn real;
    if (!real) {
        void *lib = dlopen("libopenblas.so.0", RTLD_NOW);
        RP_CHECK(lib, "profile_attention: cannot load libopenblas.so.0");
        *(void **)&real = dlsym(lib, "cblas_sgemm");
        RP_CHECK(real, "profile_attention: no cblas_sgemm in libopenblas.so.0");
    }
    void *site = __builtin_return_address(0);
    double t0 = thread_seconds();
    real(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double t = thread_seconds() - t0;
    if (!sites.on)
        return;
    int s = 0;
    while (s < sites.count && sites.address[s] != site)
        s++;
    if (s == sites.count) {
        RP_CHECK(s < MAX_SITES, "profile_attention: too many call sites");
        sites.address[sites.count++] = site;
    }
    sites.seconds[s] += t, sites.flops[s] += 2.0 * M * N * K, sites.calls[s]++;
}

int main(int argc, char **argv) {
    RP_CHECK(argc == 10, "usage: profile_attention B L H HEADS MODE K RESIDUAL REPS OUT.txt");
    const int B = atoi(argv[1]), L = atoi(argv[2]), H = atoi(argv[3]), heads = atoi(argv[4]);
    const int rel_k = atoi(argv[6]), residual = atoi(argv[7]), reps = atoi(argv[8]);
    RelKind rel = (RelKind)0;
    for (int r = 0; rel_kind_names[r]; r++)
        if (strcmp(rel_kind_names[r], argv[5]) == 0)
            rel = (RelKind)r;
    RP_CHECK(B > 0 && L > 0 && heads > 0 && H % heads == 0 && reps > 1, "profile_attention: bad arguments");
    omp_set_num_threads(1);
    AttnShape s = {.B = B, .L = L, .H = H, .num_heads = heads, .rel = rel, .rel_k = rel_k,
                   .residual = residual, .first_layer = 0, .carried_scale = 1.0f, .dropout = 0.1f,
                   .threads = 1, .t5_num_buckets = 32, .t5_max_distance = 128, .rope_theta = 10000.0f};
    const int d = H / heads;
    const size_t BL = (size_t)B * L, sq = (size_t)B * heads * L * L;
    const PosScheme *scheme = pos_scheme(rel);
    int table_rows, table_cols; /* the layer's or the model's table (t5: default buckets) */
    pos_table_shape(rel, &(PosDims){.rel_k = rel_k, .head_dim = d, .heads = heads, .t5_num_buckets = 32},
                    &table_rows, &table_cols);
    const int table_floats = table_rows * table_cols;
    float *qkv = xalloc_floats(BL * 3 * H), *d_qkv = xalloc_floats(BL * 3 * H), *ctx = xalloc_floats(BL * H);
    float *d_ctx = xalloc_floats(BL * H), *probs = xalloc_floats(sq);
    float *carried = xalloc_floats(sq), *d_carried = xalloc_floats(sq);
    float *raw = scheme->qk == POS_QK_RAW ? xalloc_floats(sq) : NULL;
    float *table = xalloc_floats((size_t)table_floats + 1), *d_table = xalloc_floats((size_t)table_floats + 1);
    float *scratch = xalloc_floats(attention_scratch_floats(&s));
    int *mask = xmalloc(sizeof(int) * BL);
    for (size_t e = 0; e < BL * 3 * H; e++)
        qkv[e] = (float)((e * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t e = 0; e < BL * H; e++)
        d_ctx[e] = (float)((e * 40503u) % 1000) / 1000.0f - 0.5f;
    for (int e = 0; e < table_floats; e++)
        table[e] = (float)(e % 13) / 13.0f - 0.5f + scheme->init_ones; /* weights near 1 */
    for (size_t e = 0; e < BL; e++)
        mask[e] = 1;
    double forward = 0, backward = 0;
    for (int r = 0; r < reps; r++) { /* the first call warms up and is not counted */
        sites.on = r > 0;
        double t0 = thread_seconds();
        attention_forward(ctx, probs, raw, carried, scratch, qkv, table, mask, &s, 7);
        double t1 = thread_seconds();
        attention_backward(d_qkv, NULL, d_table, d_carried, scratch, d_ctx, qkv, table, probs, raw, &s, 7);
        double t2 = thread_seconds();
        if (r > 0)
            forward += t1 - t0, backward += t2 - t1;
    }
    FILE *f = fopen(argv[9], "w");
    RP_CHECK(f, "%s: cannot write", argv[9]);
    fprintf(f, "calls %d\npass forward %.6f\npass backward %.6f\n", reps - 1, forward, backward);
    for (int i = 0; i < sites.count; i++)
        fprintf(f, "site %p %.6f %.0f %ld\n", sites.address[i], sites.seconds[i], sites.flops[i], sites.calls[i]);
    fclose(f);
    return 0;
}
