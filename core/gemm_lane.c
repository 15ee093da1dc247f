/* core/gemm.c's oneDNN side (core/gemm_lane.h): the engine, matmul primitives with all dimensions
 * and strides runtime arguments, keyed by (op(A), op(B), alpha, beta, bias) and the step's 9 created at
 * start-up; per lane (the context's own and one per thread) a stream, a user scratchpad and a small
 * cache of memory objects keyed by the product's shape.
 *
 * Why runtime shapes for the dense products too (issue 38): a primitive per exact shape cost 2-4
 * ms per new row count (12 products of a layer), paid inside the step whenever T changes (unpadded
 * batches every step, `longest` padding at each new length). scripts/dev/gemm_rows.sh measured the
 * step's linear-layer products at bert-mini and synthetic widths, paired in one process: runtime
 * shapes (oneDNN 2.6.3 `gemm:jit`) ran at 0.98-1.07x the time of pre-created exact primitives
 * (`brg:avx512_core_bf16`), rows rounded up to 16 at 0.99-1.01x, to 64 at 1.01-1.08x; within the
 * pairs' noise, runtime shapes need no rounded arenas nor zeroed padding rows (docs/bf16.md). */
#include "core/gemm_lane.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/bf16.h"

/* memory objects kept: per thread lane (attention's shapes and, since the dense products are split
 * into parts on the lanes (core/gemm.c), their parts' shapes: 16 thrashed), and on the shared lane
 * (a step's dense shapes: 12 per layer shape, the heads') */
enum { LANE_MEMORIES = 64, SHARED_MEMORIES = 64, PRIMITIVES_MAX = 16 };

#define LANE_CHECK(call, what)                                                                   \
    do {                                                                                         \
        dnnl_status_t status_ = (call);                                                          \
        RP_CHECK(status_ == dnnl_success, "oneDNN: %s failed (status %d)", what, (int)status_);   \
    } while (0)

typedef struct {
    int64_t key[8]; /* M, N, K, lda, ldb, ldc, ta, tb */
    dnnl_memory_t a, b, c, bias; /* bias [1, N]: made on the shape's first product with a bias */
    uint64_t last_used;
} LaneMemory;

typedef struct {
    dnnl_stream_t stream;
    dnnl_memory_t scratchpad;
    void *scratchpad_bytes;
    size_t scratch_size;
    LaneMemory *memory;
    int memories, capacity;
    uint64_t clock;
    GemmLaneStats stats;
    char pad[64]; /* lanes are written by different threads: no shared cache line */
} Lane;

typedef struct {
    int ta, tb;
    float alpha, beta;
    int bias; /* C = alpha op(A) op(B) + beta C + bias [1, N] */
    dnnl_primitive_t primitive;
} Primitive;

struct GemmLanes {
    dnnl_engine_t engine;
    Primitive primitive[PRIMITIVES_MAX];
    int primitives;
    size_t scratch_bytes; /* the largest scratchpad of the primitives */
    long primitives_created;
    char implementation[48];
    Lane shared; /* the context's own products */
    int lanes;
    Lane *lane;
};

static void matrix_desc(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld, int transposed,
                        dnnl_data_type_t type) {
    /* X [rows, cols] stored row-major with row stride ld, or transposed ([cols, rows], stride ld) */
    dnnl_dims_t dims = {rows, cols}, strides = {transposed ? 1 : ld, transposed ? ld : 1};
    LANE_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides), "describing a matrix");
}

/* C [M,N] = alpha op(A) op(B) + beta C (+ bias [1, N]) with every dimension and stride given at
 * execution. */
static int create_primitive(GemmLanes *l, int ta, int tb, float alpha, float beta, int bias) {
    RP_CHECK(l->primitives < PRIMITIVES_MAX, "internal: gemm: over %d (op(A), op(B), alpha, beta) kinds of product",
             PRIMITIVES_MAX);
    const int64_t any = DNNL_RUNTIME_DIM_VAL;
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md;
    matrix_desc(&a_md, any, any, any, ta, dnnl_bf16);
    matrix_desc(&b_md, any, any, any, tb, dnnl_bf16);
    matrix_desc(&c_md, any, any, any, 0, dnnl_f32);
    matrix_desc(&bias_md, 1, any, any, 0, dnnl_f32);
    dnnl_matmul_desc_t desc;
    LANE_CHECK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, bias ? &bias_md : NULL, &c_md), "describing a matmul");
    dnnl_primitive_attr_t attr;
    LANE_CHECK(dnnl_primitive_attr_create(&attr), "creating attributes");
    /* a user scratchpad per lane: the library's is shared, and this oneDNN is not built for
     * concurrent execution (DNNL_ENABLE_CONCURRENT_EXEC) */
    LANE_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "setting the scratchpad mode");
    if (alpha != 1.0f)
        LANE_CHECK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "setting alpha");
    dnnl_post_ops_t post = NULL;
    if (beta != 0.0f) { /* C = alpha A B + beta C: the sum post-op, in fp32 */
        LANE_CHECK(dnnl_post_ops_create(&post), "creating post-ops");
        LANE_CHECK(dnnl_post_ops_append_sum(post, beta), "appending beta C");
        LANE_CHECK(dnnl_primitive_attr_set_post_ops(attr, post), "setting post-ops");
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t status = dnnl_primitive_desc_create(&pd, &desc, attr, l->engine, NULL);
    RP_CHECK(status == dnnl_success, "oneDNN: no bf16 matmul with runtime shapes%s%s%s (status %d); set "
             "train.precision = fp32", ta ? ", A transposed" : "", tb ? ", B transposed" : "", bias ? ", a bias" : "",
             (int)status);
    const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const size_t bytes = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
    l->scratch_bytes = bytes > l->scratch_bytes ? bytes : l->scratch_bytes;
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(l->implementation, sizeof l->implementation, "%s", impl);
    Primitive *p = &l->primitive[l->primitives];
    *p = (Primitive){ta, tb, alpha, beta, bias, NULL};
    LANE_CHECK(dnnl_primitive_create(&p->primitive, pd), "creating a matmul");
    dnnl_primitive_desc_destroy(pd);
    if (post)
        dnnl_post_ops_destroy(post);
    dnnl_primitive_attr_destroy(attr);
    l->primitives_created++;
    return l->primitives++;
}

static int find_primitive(const GemmLanes *l, int ta, int tb, float alpha, float beta, int bias) {
    for (int i = 0; i < l->primitives; i++) {
        const Primitive *p = &l->primitive[i];
        if (p->ta == ta && p->tb == tb && p->alpha == alpha && p->beta == beta && p->bias == bias)
            return i;
    }
    return -1;
}

/* The lane's stream and a scratchpad of l->scratch_bytes (a byte buffer: one dimension, u8). */
static void lane_scratchpad(GemmLanes *l, Lane *lane) {
    if (lane->scratchpad)
        dnnl_memory_destroy(lane->scratchpad);
    free(lane->scratchpad_bytes);
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {(int64_t)(l->scratch_bytes ? l->scratch_bytes : 1)};
    LANE_CHECK(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_u8, dnnl_a), "describing a scratchpad");
    lane->scratchpad_bytes = xalloc_floats((l->scratch_bytes + 3) / 4 + 1);
    LANE_CHECK(dnnl_memory_create(&lane->scratchpad, &md, l->engine, lane->scratchpad_bytes), "creating a scratchpad");
    lane->scratch_size = l->scratch_bytes;
}

static void lane_open(GemmLanes *l, Lane *lane, int capacity) {
    lane->capacity = capacity;
    lane->memory = xcalloc((size_t)capacity, sizeof *lane->memory);
    if (!l->engine)
        return;
    LANE_CHECK(dnnl_stream_create(&lane->stream, l->engine, dnnl_stream_default_flags), "creating a stream");
    lane_scratchpad(l, lane);
}

GemmLanes *gemm_lanes_create(int onednn) {
    GemmLanes *l = xcalloc(1, sizeof *l);
    if (onednn) {
        LANE_CHECK(dnnl_engine_create(&l->engine, dnnl_cpu, 0), "creating the CPU engine");
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++)
                    create_primitive(l, ta, tb, 1.0f, (float)beta, 0);
        create_primitive(l, 0, 1, 1.0f, 0.0f, 1); /* a linear layer's out = in W^T + b */
    }
    lane_open(l, &l->shared, SHARED_MEMORIES);
    return l;
}

void gemm_lanes_reserve(GemmLanes *l, int lanes) {
    RP_CHECK(!l->lanes && lanes > 0, "internal: gemm_lanes_reserve: once, lanes > 0 (%d)", lanes);
    l->lanes = lanes;
    l->lane = xcalloc((size_t)lanes, sizeof *l->lane);
    for (int t = 0; t < lanes; t++)
        lane_open(l, &l->lane[t], LANE_MEMORIES);
}

static void drop_memory(LaneMemory *m) {
    dnnl_memory_destroy(m->a);
    dnnl_memory_destroy(m->b);
    dnnl_memory_destroy(m->c);
    if (m->bias)
        dnnl_memory_destroy(m->bias);
    memset(m, 0, sizeof *m);
}

static void lane_close(Lane *lane) {
    for (int i = 0; i < lane->memories; i++)
        drop_memory(&lane->memory[i]);
    free(lane->memory);
    if (lane->scratchpad)
        dnnl_memory_destroy(lane->scratchpad);
    free(lane->scratchpad_bytes);
    if (lane->stream)
        dnnl_stream_destroy(lane->stream);
}

void gemm_lanes_free(GemmLanes *l) {
    if (!l)
        return;
    for (int t = 0; t < l->lanes; t++)
        lane_close(&l->lane[t]);
    lane_close(&l->shared);
    for (int i = 0; i < l->primitives; i++)
        dnnl_primitive_destroy(l->primitive[i].primitive);
    if (l->engine)
        dnnl_engine_destroy(l->engine);
    free(l->lane);
    free(l);
}

int gemm_lanes_count(const GemmLanes *l) { return l ? l->lanes : 0; }

const char *gemm_lanes_implementation(const GemmLanes *l) { return l ? l->implementation : ""; }

/* The lane's memory objects for this shape: kept, or created in place of the least recently used. */
static LaneMemory *lane_memory(GemmLanes *l, Lane *lane, const int64_t key[8]) {
    LaneMemory *oldest = NULL;
    for (int i = 0; i < lane->memories; i++) {
        LaneMemory *m = &lane->memory[i];
        if (!memcmp(m->key, key, sizeof m->key))
            return m;
        if (!oldest || m->last_used < oldest->last_used)
            oldest = m;
    }
    LaneMemory *m = lane->memories < lane->capacity ? &lane->memory[lane->memories++] : oldest;
    if (m->a)
        drop_memory(m);
    memcpy(m->key, key, sizeof m->key);
    const int64_t M = key[0], N = key[1], K = key[2], ta = key[6], tb = key[7];
    dnnl_memory_desc_t a_md, b_md, c_md;
    matrix_desc(&a_md, M, K, key[3], (int)ta, dnnl_bf16);
    matrix_desc(&b_md, K, N, key[4], (int)tb, dnnl_bf16);
    matrix_desc(&c_md, M, N, key[5], 0, dnnl_f32);
    LANE_CHECK(dnnl_memory_create(&m->a, &a_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
    LANE_CHECK(dnnl_memory_create(&m->b, &b_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
    LANE_CHECK(dnnl_memory_create(&m->c, &c_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
    lane->stats.memories_created++;
    return m;
}

static void execute(GemmLanes *l, Lane *lane, int primitive, int ta, int tb, int M, int N, int K, const bf16 *A,
                    int lda, const bf16 *B, int ldb, const float *bias, float *C, int ldc) {
    const int64_t key[8] = {M, N, K, lda, ldb, ldc, ta, tb};
    LaneMemory *m = lane_memory(l, lane, key);
    m->last_used = ++lane->clock;
    LANE_CHECK(dnnl_memory_set_data_handle(m->a, (void *)A), "binding A");
    LANE_CHECK(dnnl_memory_set_data_handle(m->b, (void *)B), "binding B");
    LANE_CHECK(dnnl_memory_set_data_handle(m->c, C), "binding C");
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c},
                               {DNNL_ARG_SCRATCHPAD, lane->scratchpad}, {DNNL_ARG_BIAS, NULL}};
    if (bias) {
        if (!m->bias) {
            dnnl_memory_desc_t bias_md;
            matrix_desc(&bias_md, 1, N, N, 0, dnnl_f32);
            LANE_CHECK(dnnl_memory_create(&m->bias, &bias_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
        }
        LANE_CHECK(dnnl_memory_set_data_handle(m->bias, (void *)bias), "binding the bias");
        args[4].memory = m->bias;
    }
    LANE_CHECK(dnnl_primitive_execute(l->primitive[primitive].primitive, lane->stream, bias ? 5 : 4, args),
               "executing a matmul");
    LANE_CHECK(dnnl_stream_wait(lane->stream), "waiting for a matmul");
}

void gemm_lanes_run(GemmLanes *l, int lane_index, int ta, int tb, int M, int N, int K, const bf16 *A,
                    int lda, const bf16 *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    RP_CHECK(lane_index >= 0 && lane_index < l->lanes, "internal: gemm_lane: lane %d of %d", lane_index, l->lanes);
    RP_CHECK(beta == 0.0f || beta == 1.0f, "internal: gemm_lane: beta %g (0 or 1)", (double)beta);
    RP_CHECK(!bias || (!ta && tb && beta == 0.0f), "internal: gemm_lane: a bias with op(A) %s, op(B) %s, beta %g "
             "(only A B^T, beta 0)", ta ? "transposed" : "plain", tb ? "transposed" : "plain", (double)beta);
    /* the 8 made at start-up come first, in (ta, tb, beta) order, then the bias's: no search, nothing
     * created here */
    const int primitive = bias ? 8 : (ta != 0) * 4 + (tb != 0) * 2 + (beta != 0.0f);
    execute(l, &l->lane[lane_index], primitive, ta != 0, tb != 0, M, N, K, A, lda, B, ldb, bias, C, ldc);
}

void gemm_lanes_run_shared(GemmLanes *l, int ta, int tb, int M, int N, int K, float alpha, const bf16 *A, int lda,
                           const bf16 *B, int ldb, float beta, float *C, int ldc) {
    ta = ta != 0, tb = tb != 0;
    int primitive = find_primitive(l, ta, tb, alpha, beta, 0);
    if (primitive < 0) {
        primitive = create_primitive(l, ta, tb, alpha, beta, 0);
        if (l->scratch_bytes > l->shared.scratch_size) /* only this lane runs such a primitive */
            lane_scratchpad(l, &l->shared);
    }
    execute(l, &l->shared, primitive, ta, tb, M, N, K, A, lda, B, ldb, NULL, C, ldc);
}

/* C [M,N] of op(A) op(B) (+ C when beta is 1) in the blocks cut at rows[] and cols[] (each list from
 * 0 to M or N), one call a block on lane 0. */
static void product_in_blocks(GemmLanes *l, int ta, int tb, int M, int N, int K, const bf16 *A, const bf16 *B,
                              float beta, float *C, const int *rows, int row_cuts, const int *cols, int col_cuts) {
    const int lda = ta ? M : K, ldb = tb ? K : N;
    for (int i = 0; i + 1 < row_cuts; i++)
        for (int j = 0; j + 1 < col_cuts; j++) {
            const int r = rows[i], c = cols[j];
            gemm_lanes_run(l, 0, ta, tb, rows[i + 1] - r, cols[j + 1] - c, K, ta ? A + r : A + (size_t)r * lda, lda,
                           tb ? B + (size_t)c * ldb : B + c, ldb, beta, NULL, C + (size_t)r * N + c, N);
        }
}

/* x [count]: values in (-4, 4) of mixed exponents, whose sums the order of rounding moves */
static void fill_mixed(bf16 *x, size_t count, uint32_t *state) {
    for (size_t e = 0; e < count; e++) {
        *state = *state * 1664525u + 1013904223u;
        x[e] = bf16_from_float(((float)(*state >> 8) / 8388608.0f - 1.0f) * (float)(1 + (*state & 3)));
    }
}

int gemm_lanes_extent_invariant(GemmLanes *l) {
    RP_CHECK(l->lanes > 0, "internal: gemm_lanes_extent_invariant before gemm_lanes_reserve");
    if (!l->engine)
        return 1;
    /* K over several of the library's K blocks; blocks of 16 rows or columns and more (a single row
     * or column takes oneDNN's matrix-vector path, which sums otherwise: gemm_partition_threads
     * makes none), cut at no multiple of a kernel's unroll */
    enum { M = 200, N = 136, K = 1100 };
    const int whole_rows[] = {0, M}, whole_cols[] = {0, N};
    const int rows[] = {0, 16, 53, 131, M}, cols[] = {0, 40, 97, 120, N};
    bf16 *A = xcalloc((size_t)M * K, sizeof *A), *B = xcalloc((size_t)K * N, sizeof *B);
    float *whole = xcalloc((size_t)M * N, sizeof *whole), *blocks = xcalloc((size_t)M * N, sizeof *blocks);
    uint32_t state = 0x9e3779b9u;
    fill_mixed(A, (size_t)M * K, &state);
    fill_mixed(B, (size_t)K * N, &state);
    int same = 1;
    for (int kind = 0; kind < 8 && same; kind++) {
        const int ta = kind >> 2 & 1, tb = kind >> 1 & 1;
        const float beta = (float)(kind & 1);
        for (size_t e = 0; e < (size_t)M * N; e++) /* beta 1: C's prior value is part of the sum */
            whole[e] = blocks[e] = beta != 0.0f ? bf16_to_float(A[e]) : 0.0f;
        product_in_blocks(l, ta, tb, M, N, K, A, B, beta, whole, whole_rows, 2, whole_cols, 2);
        product_in_blocks(l, ta, tb, M, N, K, A, B, beta, blocks, rows, 5, cols, 5);
        same = !memcmp(whole, blocks, (size_t)M * N * sizeof *whole);
    }
    free(A), free(B), free(whole), free(blocks);
    return same;
}

void gemm_lanes_count_product(GemmLanes *l, int lane_index, double flops, double seconds) {
    GemmLaneStats *s = &l->lane[lane_index].stats;
    s->products++;
    s->flops += flops;
    s->seconds += seconds;
}

GemmLaneStats gemm_lanes_stats(const GemmLanes *l) {
    GemmLaneStats total = {0};
    for (int t = 0; l && t < l->lanes; t++) {
        const GemmLaneStats *s = &l->lane[t].stats;
        total.products += s->products;
        total.memories_created += s->memories_created;
        total.flops += s->flops;
        total.seconds += s->seconds;
    }
    total.primitives_created = l ? l->primitives_created : 0;
    return total;
}

void gemm_lanes_library_version(char *out, size_t size) {
    const dnnl_version_t *v = dnnl_version();
    snprintf(out, size, "oneDNN-%d.%d.%d", v->major, v->minor, v->patch);
}
