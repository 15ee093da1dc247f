/* Internal to layers/attention*.c and the scheme files (positions.h): the scratch plan of one
 * attention call (AttnPlan: shape, index conventions, shared buffers; AttnWork: one thread's
 * buffers), defined in attention_plan.c.
 *
 * Index conventions (per head, i = query, j = key, k = AttnShape.rel_k, the truncation distance):
 *   r(i,j) = clip(i-j, -k, k) + k        table row of shaw, method2, method3, method4
 *   m = min(k, L-1)                      rows k-m .. k+m are the only ones reachable at length L
 *   r'(i,j) = clip(i-j, -m, m) + m       = r(i,j) - (k-m), index into the reachable rows
 *   u(i,j) = j - i + L - 1 in [0, 2L-1)  index of the per-call weight row w2 (methods 1, 2)
 * Every row i splits its keys into left j <= i-c (clipped to row 2c), band i-c < j < i+c and
 * right j >= i+c (clipped to row 0), with c = m for shaw / method4 and c = k for method3. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h"
#include "core/gemm.h"
#include "layers/attention_shape.h"
#include "layers/positions.h"

#define ATTN_SLOTS 32 /* (b,h) pairs are split into this many fixed groups for table partials */

typedef struct AttnPlan {
    int B, L, H, heads, d, BL, BH, ld; /* ld = 3H, the row stride of qkv and d_qkv */
    const AttnShape *shape;  /* the call's shape (the scheme's own parameters) */
    const PosScheme *scheme; /* the row of shape->rel */
    int dropout;  /* s->dropout > 0: the work buffers hold dropout(P) */
    int bf16;     /* s->gemm is bf16: the main products in bf16 (the work buffers' *16) */
    int rel_k;    /* truncation distance k (0 unless the scheme uses k) */
    int m, R;     /* reachable distance m = min(k, L-1), R = 2m+1 reachable table rows */
    int at_ld;    /* method3: 2k+1 */
    float scale;  /* 1/sqrt(d) */
    int slots;    /* min(BH, ATTN_SLOTS); slot s owns bh in [s*BH/slots, (s+1)*BH/slots) */
    int block;    /* rows per relative-term GEMM (QA / KA blocks, method3 regions),
                   * clamp(L/4, 32, 64): a block reaches at most L + block - 1 table rows
                   * (all rows reach 2L-1 at k >= L-1), and GEMMs keep >= 32 rows */
    /* shared scratch (NULL when unused) */
    float *w2;           /* methods 1, 2: [2L-1] w2[u] = table weight for the offset u */
    float *at;           /* method3: [d, 2k+1] at[t][v] = a[2k-v][t], v = j-i+k (forward band) */
    bf16 *table16;       /* shaw, method4 in bf16: [R, d] the reachable table rows in bf16 */
    PosTables tables;    /* length-only tables (bias2: t5, alibi; cos, sin: rope): s->tables'
                          * or built by the call in its scratch (own_tables) */
    int own_tables;
    float *slot_grad;    /* [slots, slot_floats] per-slot table-gradient sums: [R, d] by r'
                          * (shaw, method3, method4), [2L-1] by u (methods 1, 2), [heads, 2L-1]
                          * by h and u (t5) */
    size_t slot_floats;
    float *bias_part;    /* backward: [BH, 3d] per-(b,h) column sums of d_qkv over its L rows
                          * (dq | dk | dv), summed over b into the qkv bias gradient */
    float *work;         /* per-thread buffers: thread t owns work + t*work_floats */
    size_t work_floats;
    int threads;         /* work buffers laid out: the parallel regions' team size at most */
    size_t total_floats; /* whole scratch need */
} AttnPlan;

typedef struct AttnWork {
    float *dscore;       /* [L, L] backward: dPd, then dS, then dRaw */
    float *dropped;      /* [L, L] dropout(P) of the (b,h) at hand (NULL without dropout) */
    float *vec0, *vec1;  /* [L] each */
    float *qs0, *qs2;    /* method3: [L, d] Q (.) a_0 and Q (.) a_2k */
    float *kt;           /* method3: [d, L] K^T */
    float *blk;          /* [block, max(L, R)]: QA / KA block (shaw, method4) or region
                          * scores (method3) */
    float *blk_key;      /* method4 in one block (block >= L): [L, R] KA beside QA in blk */
    float *blk_g;        /* method3: [block, d] */
    float *arow_grad;    /* method3: [d] gradient of a clipped-region table row */
    float *rot;          /* rope: [2, L, d] the head's rotated q and k, contiguous */
    bf16 *q16, *k16, *v16, *g16; /* bf16 only: [L, d] each, the (b,h)'s q, k, v and dctx in bf16 */
    bf16 *s16;           /* bf16 only: [L, L] dropout(P) in bf16 (forward), dS (backward: dQ, dK) */
    bf16 *p16;           /* bf16 only: [L, L] dropout(P) in bf16 (backward: dV) */
    bf16 *blk16;         /* shaw, method4 in bf16: blk's dQA / dKA block in bf16 */
    float *ctx32;        /* bf16 only: [L, d] the (b,h)'s P.V before it is rounded into shape->ctx16 */
    float *qk32;         /* bf16 with a scheme that reads fp32 q, k (rope, method3): [2, L, d] the
                          * (b,h)'s q and k expanded from shape->qkv16 (NULL otherwise) */
} AttnWork;

/* n rounded up to whole 16-float lines (slot partials start 64-byte aligned). */
static inline size_t attn_round16(size_t n) { return (n + 15) / 16 * 16; }

/* Left end (exclusive) and right start of row i's band for clip distance c (see above). */
static inline void rel_split(int i, int c, int L, int *left_end, int *right_start) {
    int le = i - c + 1, rs = i + c;
    le = le < 0 ? 0 : (le > L ? L : le);
    rs = rs < le ? le : (rs > L ? L : rs);
    *left_end = le;
    *right_start = rs;
}

/* One (b,h)'s product inside the parallel region, C = op(A) op(B) + beta C (beta 0 or 1): fp32
 * (gemm_f32 on A.f32, B.f32) or, with p->bf16, bf16 operands (gemm_lane on A.b16, B.b16 on the
 * calling thread's lane). Each operand gives both forms' row strides. */
typedef struct {
    const float *f32;
    int ld;
    const bf16 *b16;
    int ld16;
} AttnOperand;
void attn_product(const AttnPlan *p, GemmOp ta, GemmOp tb, int M, int N, int K, AttnOperand A, AttnOperand B,
                  float beta, float *C, int ldc);
/* out [rows, cols] (row stride cols) = bf16(in [rows, cols] at row stride ld), on the calling thread. */
void attn_to_bf16(bf16 *out, const float *in, int rows, int cols, int ld);

/* 1 when a bf16 call's scheme reads q, k in fp32 (rope's rotation, method3's terms): with
 * shape->qkv16 they are expanded into w->qk32 per (b,h) (attn_expand_qk). */
int attn_needs_qk32(const AttnPlan *p);
/* w->qk32 = the (b,h)'s q and k of shape->qkv16 in fp32 (exact). */
void attn_expand_qk(const AttnPlan *p, const AttnWork *w, int b, int h);
/* The (b,h)'s q (part 0) or k (1) in fp32 as the scheme's terms read them, *ld its row stride:
 * qkv's rows (p->ld), or with shape->qkv16 the expansion w->qk32 (d; NULL if the scheme has none). */
const float *attn_head32(const AttnPlan *p, const AttnWork *w, const float *qkv, int b, int h, int part, int *ld);
/* bf16: the (b,h)'s q (part 0), k (1) or v (2) as the products read them, *ld16 its row stride:
 * shape->qkv16's rows (p->ld), or the thread's rounded copies w->q16, k16, v16 (d) when the call
 * has fp32 qkv or the scheme rotates q and k. */
const bf16 *attn_head16(const AttnPlan *p, const AttnWork *w, int b, int h, int part, int *ld16);

/* attention_rows.c, for backward_bh: dS from dPd in D [L, L] for one (b,h) (its comment there), and
 * sums [3d] = the column sums of one (b,h)'s dq | dk | dv. */
void attn_score_grad_rows(float *restrict D, float *restrict d_carried, float *restrict diag, bf16 *restrict Pd16,
                          bf16 *restrict D16, const float *restrict P, const float *restrict Pd, int L, float scale,
                          float carried_scale);
void attn_head_column_sums(float *restrict sums, const float *dq, int L, int d, int H, int ld);

/* Lay out `scratch` (NULL: only measure; total_floats for s->threads threads). */
void attn_plan(AttnPlan *p, const AttnShape *s, float *scratch);
/* Thread `thread`'s buffers in the plan's work area. */
AttnWork attn_work(const AttnPlan *p, int thread);

/* Unpadded batches (attention_varlen.c): attention_forward / backward / scratch_floats of a shape
 * with seq_offsets, one sequence per thread at a time. */
size_t attn_varlen_scratch_floats(const AttnShape *s);
void attn_varlen_forward(float *ctx, float *probs, float *raw_scores, float *carried, float *scratch,
                         const float *qkv, const float *table, const AttnShape *s, uint64_t dropout_key);
void attn_varlen_backward(float *d_qkv, float *d_qkv_bias, float *d_table, float *d_carried, float *scratch,
                          const float *d_ctx, const float *qkv, const float *table, const float *probs,
                          const float *raw_scores, const AttnShape *s, uint64_t dropout_key);
