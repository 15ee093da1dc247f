/* gemm_lane's oneDNN side (core/gemm_lane.h): one matmul primitive per (op(A), op(B), beta), all
 * dimensions and strides runtime arguments, created at start-up; per lane (thread) a stream, a
 * user scratchpad and a small cache of memory objects keyed by the product's shape. */
#include "core/gemm_lane.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/bf16.h"

enum { LANE_MEMORIES = 16, LANE_PRIMITIVES = 8 }; /* per lane: shapes kept; (ta, tb, beta 0/1) */

#define LANE_CHECK(call, what)                                                                   \
    do {                                                                                         \
        dnnl_status_t status_ = (call);                                                          \
        RP_CHECK(status_ == dnnl_success, "oneDNN: %s failed (status %d)", what, (int)status_);   \
    } while (0)

typedef struct {
    int64_t key[9]; /* ta, tb, M, N, K, lda, ldb, ldc, beta != 0 */
    dnnl_memory_t a, b, c;
    uint64_t last_used;
} LaneMemory;

typedef struct {
    dnnl_stream_t stream;
    dnnl_memory_t scratchpad;
    void *scratchpad_bytes;
    LaneMemory memory[LANE_MEMORIES];
    int memories;
    uint64_t clock;
    GemmLaneStats stats;
    char pad[64]; /* lanes are written by different threads: no shared cache line */
} Lane;

struct GemmLanes {
    dnnl_engine_t engine;
    dnnl_primitive_t primitive[LANE_PRIMITIVES];
    int lanes;
    Lane *lane;
};

static void matrix_desc(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld, int transposed,
                        dnnl_data_type_t type) {
    /* X [rows, cols] stored row-major with row stride ld, or transposed ([cols, rows], stride ld) */
    dnnl_dims_t dims = {rows, cols}, strides = {transposed ? 1 : ld, transposed ? ld : 1};
    LANE_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides), "describing a matrix");
}

static int primitive_index(int ta, int tb, int beta) { return ta * 4 + tb * 2 + beta; }

GemmLanes *gemm_lanes_create(int lanes, int onednn) {
    GemmLanes *l = xcalloc(1, sizeof *l);
    l->lanes = lanes;
    l->lane = xcalloc((size_t)lanes, sizeof *l->lane);
    if (!onednn)
        return l;
    LANE_CHECK(dnnl_engine_create(&l->engine, dnnl_cpu, 0), "creating the CPU engine");
    const int64_t any = DNNL_RUNTIME_DIM_VAL;
    size_t scratch_bytes = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                dnnl_memory_desc_t a_md, b_md, c_md;
                matrix_desc(&a_md, any, any, any, ta, dnnl_bf16);
                matrix_desc(&b_md, any, any, any, tb, dnnl_bf16);
                matrix_desc(&c_md, any, any, any, 0, dnnl_f32);
                dnnl_matmul_desc_t desc;
                LANE_CHECK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md), "describing a matmul");
                dnnl_primitive_attr_t attr;
                LANE_CHECK(dnnl_primitive_attr_create(&attr), "creating attributes");
                /* a user scratchpad per lane: the library's is shared, and this oneDNN is not built
                 * for concurrent execution (DNNL_ENABLE_CONCURRENT_EXEC) */
                LANE_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user),
                           "setting the scratchpad mode");
                dnnl_post_ops_t post = NULL;
                if (beta) {
                    LANE_CHECK(dnnl_post_ops_create(&post), "creating post-ops");
                    LANE_CHECK(dnnl_post_ops_append_sum(post, 1.0f), "appending C");
                    LANE_CHECK(dnnl_primitive_attr_set_post_ops(attr, post), "setting post-ops");
                }
                dnnl_primitive_desc_t pd;
                dnnl_status_t status = dnnl_primitive_desc_create(&pd, &desc, attr, l->engine, NULL);
                RP_CHECK(status == dnnl_success, "oneDNN: no bf16 matmul with runtime shapes (status %d); set "
                         "train.precision = fp32", (int)status);
                const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
                size_t bytes = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
                scratch_bytes = bytes > scratch_bytes ? bytes : scratch_bytes;
                LANE_CHECK(dnnl_primitive_create(&l->primitive[primitive_index(ta, tb, beta)], pd),
                           "creating a matmul");
                dnnl_primitive_desc_destroy(pd);
                if (post)
                    dnnl_post_ops_destroy(post);
                dnnl_primitive_attr_destroy(attr);
            }
    for (int t = 0; t < lanes; t++) {
        Lane *lane = &l->lane[t];
        LANE_CHECK(dnnl_stream_create(&lane->stream, l->engine, dnnl_stream_default_flags), "creating a stream");
        /* every primitive's scratchpad fits in the largest (a byte buffer: one dimension, u8) */
        dnnl_memory_desc_t md;
        dnnl_dims_t dims = {(int64_t)(scratch_bytes ? scratch_bytes : 1)};
        LANE_CHECK(dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_u8, dnnl_a), "describing a scratchpad");
        lane->scratchpad_bytes = xalloc_floats((scratch_bytes + 3) / 4 + 1);
        LANE_CHECK(dnnl_memory_create(&lane->scratchpad, &md, l->engine, lane->scratchpad_bytes),
                   "creating a scratchpad");
    }
    return l;
}

static void drop_memory(LaneMemory *m) {
    dnnl_memory_destroy(m->a);
    dnnl_memory_destroy(m->b);
    dnnl_memory_destroy(m->c);
    memset(m, 0, sizeof *m);
}

void gemm_lanes_free(GemmLanes *l) {
    if (!l)
        return;
    for (int t = 0; t < l->lanes; t++) {
        Lane *lane = &l->lane[t];
        for (int i = 0; i < lane->memories; i++)
            drop_memory(&lane->memory[i]);
        if (lane->scratchpad)
            dnnl_memory_destroy(lane->scratchpad);
        free(lane->scratchpad_bytes);
        if (lane->stream)
            dnnl_stream_destroy(lane->stream);
    }
    for (int i = 0; i < LANE_PRIMITIVES; i++)
        if (l->primitive[i])
            dnnl_primitive_destroy(l->primitive[i]);
    if (l->engine)
        dnnl_engine_destroy(l->engine);
    free(l->lane);
    free(l);
}

int gemm_lanes_count(const GemmLanes *l) { return l ? l->lanes : 0; }

/* The lane's memory objects for this shape: kept, or created in place of the least recently used. */
static LaneMemory *lane_memory(GemmLanes *l, Lane *lane, const int64_t key[9]) {
    LaneMemory *oldest = NULL;
    for (int i = 0; i < lane->memories; i++) {
        LaneMemory *m = &lane->memory[i];
        if (!memcmp(m->key, key, sizeof m->key))
            return m;
        if (!oldest || m->last_used < oldest->last_used)
            oldest = m;
    }
    LaneMemory *m = lane->memories < LANE_MEMORIES ? &lane->memory[lane->memories++] : oldest;
    if (m->a)
        drop_memory(m);
    memcpy(m->key, key, sizeof m->key);
    const int64_t ta = key[0], tb = key[1], M = key[2], N = key[3], K = key[4];
    dnnl_memory_desc_t a_md, b_md, c_md;
    matrix_desc(&a_md, M, K, key[5], (int)ta, dnnl_bf16);
    matrix_desc(&b_md, K, N, key[6], (int)tb, dnnl_bf16);
    matrix_desc(&c_md, M, N, key[7], 0, dnnl_f32);
    LANE_CHECK(dnnl_memory_create(&m->a, &a_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
    LANE_CHECK(dnnl_memory_create(&m->b, &b_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
    LANE_CHECK(dnnl_memory_create(&m->c, &c_md, l->engine, DNNL_MEMORY_NONE), "creating a memory object");
    lane->stats.memories_created++;
    return m;
}

void gemm_lanes_run(GemmLanes *l, int lane_index, int ta, int tb, int M, int N, int K, const bf16 *A,
                    int lda, const bf16 *B, int ldb, float beta, float *C, int ldc) {
    RP_CHECK(lane_index >= 0 && lane_index < l->lanes, "internal: gemm_lane: lane %d of %d", lane_index, l->lanes);
    RP_CHECK(beta == 0.0f || beta == 1.0f, "internal: gemm_lane: beta %g (0 or 1)", (double)beta);
    Lane *lane = &l->lane[lane_index];
    const int64_t key[9] = {ta != 0, tb != 0, M, N, K, lda, ldb, ldc, beta != 0.0f};
    LaneMemory *m = lane_memory(l, lane, key);
    m->last_used = ++lane->clock;
    LANE_CHECK(dnnl_memory_set_data_handle(m->a, (void *)A), "binding A");
    LANE_CHECK(dnnl_memory_set_data_handle(m->b, (void *)B), "binding B");
    LANE_CHECK(dnnl_memory_set_data_handle(m->c, C), "binding C");
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c},
                               {DNNL_ARG_SCRATCHPAD, lane->scratchpad}};
    dnnl_primitive_t p = l->primitive[primitive_index(ta != 0, tb != 0, beta != 0.0f)];
    LANE_CHECK(dnnl_primitive_execute(p, lane->stream, 4, args), "executing a matmul");
    LANE_CHECK(dnnl_stream_wait(lane->stream), "waiting for a matmul");
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
    return total;
}
