/* Internal to layers/attention.c and layers/relpos.c: the scratch plan of one attention call and
 * the relative-position terms of the scores (see docs/attention.md).
 *
 * Index conventions (per head, i = query, j = key):
 *   r(i,j) = clip(i-j, -k, k) + k        table row of shaw, method2, method3, method4
 *   m = min(k, L-1), R = 2m+1            rows k-m .. k+m are the only ones reachable at length L
 *   r'(i,j) = clip(i-j, -m, m) + m       = r(i,j) - (k-m), column of the QA / KA scratch
 *   u(i,j) = j - i + L - 1 in [0, 2L-1)  index of the per-call weight row w2 (methods 1, 2)
 * Every row i splits its keys into left j <= i-c (clipped to row 2c), band i-c < j < i+c and
 * right j >= i+c (clipped to row 0), with c = m for the QA gather and c = k for method3. */
#pragma once
#include <stddef.h>

#include "attention.h"

#define ATTN_SLOTS 32 /* (b,h) pairs are split into this many fixed groups for table partials */
#define ATTN_BLOCK 32 /* query rows per GEMM in method3's clipped regions */

typedef struct {
    int B, L, H, heads, d, BL, BH, ld; /* ld = 3H, the row stride of qkv and d_qkv */
    RelKind rel;
    int k, m, R;  /* truncation, reachable distance, reachable table rows (see above) */
    int at_ld;    /* method3: 2k+1 */
    float scale;  /* 1/sqrt(d) */
    int slots;    /* min(BH, ATTN_SLOTS); slot s owns bh in [s*BH/slots, (s+1)*BH/slots) */
    /* shared scratch (NULL when unused) */
    float *qa, *ka;      /* shaw, method4: [heads, BL, R] q.a_{r'} and k.a_{r'}; backward: d of those */
    float *w2;           /* methods 1, 2: [2L-1] w2[u] = table weight for the offset u */
    float *at;           /* method3: [d, 2k+1] at[t][v] = a[2k-v][t], v = j-i+k */
    float *slot_grad;    /* methods 1-3: [slots, slot_floats] per-slot table-gradient sums */
    size_t slot_floats;
    float *work;         /* per-thread buffers: thread t owns work + t*work_floats */
    size_t work_floats;
    size_t total_floats; /* whole scratch need */
} AttnPlan;

typedef struct {
    float *dscore;       /* [L, L] backward: dP, then dS, then dRaw */
    float *vec0, *vec1;  /* [L] each */
    float *qs0, *qs2;    /* method3: [L, d] Q (.) a_0 and Q (.) a_2k */
    float *kt, *dkt;     /* method3: [d, L] K^T and d(K^T) */
    float *blk, *blk_g;  /* method3: [ATTN_BLOCK, L] region scores, [ATTN_BLOCK, d] their product */
} AttnWork;

/* Left end (exclusive) and right start of row i's band for clip distance c (see above). */
static inline void rel_split(int i, int c, int L, int *left_end, int *right_start) {
    int le = i - c + 1, rs = i + c;
    le = le < 0 ? 0 : (le > L ? L : le);
    rs = rs < le ? le : (rs > L ? L : rs);
    *left_end = le;
    *right_start = rs;
}

/* Lay out `scratch` (NULL: only measure; total_floats for num_threads threads). */
void attn_plan(AttnPlan *p, const AttnShape *s, int num_threads, float *scratch);
AttnWork attn_work(const AttnPlan *p, int thread);

/* Before the (b,h) loop: the w2 / at copies of the table and (forward) the QA / KA GEMMs. */
void relpos_prepare(const AttnPlan *p, const float *qkv, const float *table, int forward);

/* Scores of one (b,h), without the 1/sqrt(d) scale, into scores [L, L]:
 *   none, shaw, method4: on entry q.k; adds the relative terms;
 *   methods 1, 2: scores = raw (.) w;   method3: computes everything. */
void relpos_scores(const AttnPlan *p, const AttnWork *w, float *scores, const float *raw,
                   const float *qkv, const float *table, int b, int h);

/* Backward of relpos_scores for one (b,h). dscore [L, L] holds dL/d(unscaled scores) on entry.
 *   methods 1, 2: part[u] += dscore (.) raw; dscore becomes dL/d(q.k)  (caller does dQ, dK)
 *   shaw, method4: scatters dscore into the qa / ka scratch as dL/d(QA), dL/d(KA)
 *   method3: writes this (b,h)'s dQ and dK into d_qkv and table gradients into part */
void relpos_backward(const AttnPlan *p, const AttnWork *w, float *dscore, float *part,
                     float *d_qkv, const float *raw, const float *qkv, const float *table, int b,
                     int h);

/* After the (b,h) loop: shaw / method4 per-head GEMMs into d_qkv and d_table; methods 1-3 sum
 * the slot partials into d_table in a fixed order. */
void relpos_finish(const AttnPlan *p, float *d_qkv, float *d_table, const float *qkv,
                   const float *table);
