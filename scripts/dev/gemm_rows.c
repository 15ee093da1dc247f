/* How to run the dense bf16 products of a step whose row count T changes every batch without
 * creating a oneDNN primitive inside the step (issue 38). Side by side in one process, rounds
 * interleaved, over the linear layers' products of one encoder layer at T rows:
 *   forward   C [T,o] = X [T,i] W [o,i]^T (+ C)        (N,T)  M = T
 *   d_in      C [T,i] = dY [T,o] W [o,i]   (+ C)        (N,N)  M = T
 *   dW        C [o,i] += dY [T,o]^T X [T,i]             (T,N)  K = T
 * for (qkv H->3H, attention out H->H, feed-forward in H->I and out I->H):
 *   exact    one primitive per exact shape, created before timing (the cost-free ideal; today a new
 *            T pays the creation, also printed);
 *   runtime  (a) one primitive per (ta, tb, N, fixed dim, beta) with the T dimension a runtime
 *            argument (DNNL_RUNTIME_DIM_VAL), created once;
 *   round R  (b) exact primitives at T rounded up to a multiple of R (M = T_R rows computed and
 *            ignored; for dW, K = T_R with the padding rows of both operands zero).
 * GFLOP/s count the real products (2 M N K at T). Usage: gemm_rows H I T1 T2 ... [--rounds R] */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        dnnl_status_t s_ = (call);                                                           \
        if (s_ != dnnl_success) {                                                            \
            fprintf(stderr, "gemm_rows: %s failed (status %d)\n", #call, (int)s_);          \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;

typedef struct {
    int ta, tb;
    int64_t M, N, K; /* DNNL_RUNTIME_DIM_VAL where runtime */
    int64_t lda, ldb, ldc;
    float beta;
} Key;

typedef struct {
    dnnl_primitive_t p;
    const char *impl;
    dnnl_memory_t scratchpad; /* (a') as realpos runs it: a user scratchpad; else NULL */
} Prim;

static void desc2(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld, int transposed,
                  dnnl_data_type_t t) {
    dnnl_dims_t dims = {rows, cols}, strides = {transposed ? 1 : ld, transposed ? ld : 1};
    CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides));
}

static Prim make(const Key *k) {
    dnnl_memory_desc_t a, b, c;
    desc2(&a, k->M, k->K, k->lda, k->ta, dnnl_bf16);
    desc2(&b, k->K, k->N, k->ldb, k->tb, dnnl_bf16);
    desc2(&c, k->M, k->N, k->ldc, 0, dnnl_f32);
    dnnl_matmul_desc_t d;
    CHECK(dnnl_matmul_desc_init(&d, &a, &b, NULL, &c));
    dnnl_primitive_attr_t attr;
    CHECK(dnnl_primitive_attr_create(&attr));
    const int user_scratchpad = k->N == DNNL_RUNTIME_DIM_VAL;
    if (user_scratchpad)
        CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    dnnl_post_ops_t post = NULL;
    if (k->beta != 0.0f) {
        CHECK(dnnl_post_ops_create(&post));
        CHECK(dnnl_post_ops_append_sum(post, k->beta));
        CHECK(dnnl_primitive_attr_set_post_ops(attr, post));
    }
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &d, attr, engine, NULL));
    Prim r = {0};
    if (user_scratchpad) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
        dnnl_memory_desc_t u8;
        dnnl_dims_t dims = {(int64_t)(bytes ? bytes : 1)};
        CHECK(dnnl_memory_desc_init_by_tag(&u8, 1, dims, dnnl_u8, dnnl_a));
        CHECK(dnnl_memory_create(&r.scratchpad, &u8, engine, DNNL_MEMORY_ALLOCATE));
    }
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    r.impl = impl ? strdup(impl) : "?";
    CHECK(dnnl_primitive_create(&r.p, pd));
    dnnl_primitive_desc_destroy(pd);
    if (post)
        dnnl_post_ops_destroy(post);
    dnnl_primitive_attr_destroy(attr);
    return r;
}

static void run(const Prim *pr, int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                int64_t ldc, void *A, void *B, float *C) {
    dnnl_memory_desc_t a, b, c;
    desc2(&a, M, K, lda, ta, dnnl_bf16);
    desc2(&b, K, N, ldb, tb, dnnl_bf16);
    desc2(&c, M, N, ldc, 0, dnnl_f32);
    dnnl_memory_t ma, mb, mc;
    CHECK(dnnl_memory_create(&ma, &a, engine, A));
    CHECK(dnnl_memory_create(&mb, &b, engine, B));
    CHECK(dnnl_memory_create(&mc, &c, engine, C));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
                               {DNNL_ARG_SCRATCHPAD, pr->scratchpad}};
    CHECK(dnnl_primitive_execute(pr->p, stream, pr->scratchpad ? 4 : 3, args));
    CHECK(dnnl_stream_wait(stream));
    dnnl_memory_destroy(ma), dnnl_memory_destroy(mb), dnnl_memory_destroy(mc);
}

/* The 12 products of one layer at T rows: (i, o) per linear layer, three products each. */
typedef struct {
    int ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    float beta;
    int t_dim; /* 0: M = T, 2: K = T */
} Product;

static int products_at(int64_t H, int64_t I, int64_t T, Product *out) {
    const int64_t io[4][2] = {{H, 3 * H}, {H, H}, {H, I}, {I, H}};
    int n = 0;
    for (int l = 0; l < 4; l++) {
        const int64_t i = io[l][0], o = io[l][1];
        out[n++] = (Product){0, 1, T, o, i, i, i, o, l != 2 ? 1.0f : 0.0f, 0}; /* forward, bias as beta 1 */
        out[n++] = (Product){0, 0, T, i, o, o, i, i, 0.0f, 0};                /* d_in */
        out[n++] = (Product){1, 0, o, i, T, o, i, i, 1.0f, 2};                /* dW += */
    }
    return n;
}

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int64_t round_up(int64_t x, int64_t r) { return (x + r - 1) / r * r; }

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: gemm_rows H I T1 [T2 ...] [--rounds R]\n");
        return 2;
    }
    const int64_t H = atoll(argv[1]), I = atoll(argv[2]);
    int64_t Ts[64];
    int nT = 0, rounds = 5;
    for (int a = 3; a < argc; a++) {
        if (!strcmp(argv[a], "--rounds") && a + 1 < argc)
            rounds = atoi(argv[++a]);
        else if (nT < 64)
            Ts[nT++] = atoll(argv[a]);
    }
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    int64_t Tmax = 0;
    for (int t = 0; t < nT; t++)
        Tmax = Ts[t] > Tmax ? Ts[t] : Tmax;
    const int64_t rows = round_up(Tmax, 64), wide = 3 * H > I ? 3 * H : I;
    /* operands: every buffer holds the rounded worst case; rows past T are zero */
    uint16_t *A = calloc((size_t)(rows * wide + wide * wide), 2), *B = calloc((size_t)(rows * wide + wide * wide), 2);
    float *C = calloc((size_t)(rows * wide + wide * wide), 4);
    for (size_t e = 0; e < (size_t)(rows * wide); e++)
        A[e] = 0x3f80 ^ (uint16_t)(e % 7), B[e] = 0x3f00 ^ (uint16_t)(e % 5);
    enum { METHODS = 5 };
    const char *names[METHODS] = {"exact (pre-created)", "(a) runtime T dim", "(a') all runtime (realpos)",
                                  "(b) T rounded to 16", "(b) T rounded to 64"};
    const int64_t multiple[METHODS] = {1, 0, -1, 16, 64}; /* 0: the T dimension runtime, -1: all of them */
    double seconds[METHODS] = {0}, flops = 0, create_seconds = 0;
    int created = 0;
    const char *impl[METHODS] = {0};
    /* primitives: made before timing for every method (exact/rounded per T; runtime once) */
    Product pr[12];
    Prim *prim[METHODS][64];
    for (int m = 0; m < METHODS; m++)
        for (int t = 0; t < nT; t++) {
            const int np = products_at(H, I, Ts[t], pr);
            prim[m][t] = calloc(12, sizeof(Prim));
            for (int p = 0; p < np; p++) {
                Key k = {pr[p].ta, pr[p].tb, pr[p].M, pr[p].N, pr[p].K, pr[p].lda, pr[p].ldb, pr[p].ldc, pr[p].beta};
                int64_t *tdim = pr[p].t_dim == 0 ? &k.M : &k.K;
                if (multiple[m] <= 0) {
                    if (t > 0) {
                        prim[m][t][p] = prim[m][0][p];
                        continue;
                    }
                    *tdim = DNNL_RUNTIME_DIM_VAL;
                    if (multiple[m] < 0)
                        k.M = k.N = k.K = k.lda = k.ldb = k.ldc = DNNL_RUNTIME_DIM_VAL;
                } else {
                    *tdim = round_up(*tdim, multiple[m]);
                }
                double t0 = omp_get_wtime();
                prim[m][t][p] = make(&k);
                if (m == 0)
                    create_seconds += omp_get_wtime() - t0, created++;
                if (p == 0)
                    impl[m] = prim[m][t][p].impl;
            }
        }
    /* pairs: for each round and T, the methods back to back (order alternating), so each ratio to
     * exact's time meets the same load */
    enum { PAIRS_MAX = 4096 };
    static double pair_ratio[METHODS][PAIRS_MAX];
    int pairs = 0;
    for (int r = 0; r < rounds + 1; r++) /* round 0 warms up, untimed */
        for (int t = 0; t < nT; t++) {
            double took[METHODS];
            for (int i = 0; i < METHODS; i++) {
                const int m = ((r + t) & 1) ? METHODS - 1 - i : i;
                double t0 = omp_get_wtime();
                const int np = products_at(H, I, Ts[t], pr);
                for (int p = 0; p < np; p++) {
                    Product x = pr[p];
                    if (multiple[m] > 1) {
                        int64_t *tdim = x.t_dim == 0 ? &x.M : &x.K;
                        *tdim = round_up(*tdim, multiple[m]);
                    }
                    run(&prim[m][t][p], x.ta, x.tb, x.M, x.N, x.K, x.lda, x.ldb, x.ldc, A, B, C);
                    if (r > 0 && m == 0)
                        flops += 2.0 * pr[p].M * pr[p].N * pr[p].K;
                }
                took[m] = omp_get_wtime() - t0;
                if (r > 0)
                    seconds[m] += took[m];
            }
            if (r > 0 && pairs < PAIRS_MAX) {
                for (int m = 0; m < METHODS; m++)
                    pair_ratio[m][pairs] = took[m] / took[0];
                pairs++;
            }
        }
    printf("H %lld I %lld, %d row counts T, %d rounds, %d threads; time / exact's time over %d pairs: median "
           "[10th..90th percentile]\n", (long long)H, (long long)I, nT, rounds, omp_get_max_threads(), pairs);
    for (int m = 0; m < METHODS; m++) {
        qsort(pair_ratio[m], (size_t)pairs, sizeof(double), compare_doubles);
        printf("  %-22s %7.1f GFLOP/s  %.3f [%.3f..%.3f] (%.3f ms a layer's 12 products; %s)\n", names[m],
               flops / seconds[m] * 1e-9, pair_ratio[m][pairs / 2], pair_ratio[m][pairs / 10],
               pair_ratio[m][pairs * 9 / 10], seconds[m] / rounds / nT * 1e3, impl[m]);
    }
    printf("  creating a new T's 12 exact primitives: %.3f ms\n", create_seconds / nT * 1e3);
    return 0;
}
