/* Internal to layers/attention.c and layers/relpos.c: the scratch plan of one attention call and
 * the relative-position terms of the scores (see docs/attention.md).
 *
 * Index conventions (per head, i = query, j = key):
 *   r(i,j) = clip(i-j, -k, k) + k        table row of shaw, method2, method3, method4
 *   m = min(k, L-1)                      rows k-m .. k+m are the only ones reachable at length L
 *   r'(i,j) = clip(i-j, -m, m) + m       = r(i,j) - (k-m), index into the reachable rows
 *   u(i,j) = j - i + L - 1 in [0, 2L-1)  index of the per-call weight row w2 (methods 1, 2)
 * Every row i splits its keys into left j <= i-c (clipped to row 2c), band i-c < j < i+c and
 * right j >= i+c (clipped to row 0), with c = m for shaw / method4 and c = k for method3. */
#pragma once
#include <stddef.h>

#include "layers/attention.h"

#define ATTN_SLOTS 32 /* (b,h) pairs are split into this many fixed groups for table partials */

typedef struct {
    int B, L, H, heads, d, BL, BH, ld; /* ld = 3H, the row stride of qkv and d_qkv */
    RelKind rel;
    int k, m, R;  /* truncation, reachable distance, R = 2m+1 reachable table rows */
    int at_ld;    /* method3: 2k+1 */
    float scale;  /* 1/sqrt(d) */
    int slots;    /* min(BH, ATTN_SLOTS); slot s owns bh in [s*BH/slots, (s+1)*BH/slots) */
    int block;    /* rows per relative-term GEMM (QA / KA blocks, method3 regions),
                   * clamp(L/4, 16, 64): a block reaches at most L + block - 1 table rows
                   * (all rows reach 2L-1 at k >= L-1), and GEMMs keep >= 16 rows */
    /* shared scratch (NULL when unused) */
    float *w2;           /* methods 1, 2: [2L-1] w2[u] = table weight for the offset u */
    float *at;           /* method3: [d, 2k+1] at[t][v] = a[2k-v][t], v = j-i+k (forward band) */
    float *slot_grad;    /* [slots, slot_floats] per-slot table-gradient sums: [R, d] by r'
                          * (shaw, method3, method4), [2L-1] by u (methods 1, 2) */
    size_t slot_floats;
    float *work;         /* per-thread buffers: thread t owns work + t*work_floats */
    size_t work_floats;
    int threads;         /* work buffers laid out: the parallel regions' team size at most */
    size_t total_floats; /* whole scratch need */
} AttnPlan;

typedef struct {
    float *dscore;       /* [L, L] backward: dP, then dS, then dRaw */
    float *vec0, *vec1;  /* [L] each */
    float *qs0, *qs2;    /* method3: [L, d] Q (.) a_0 and Q (.) a_2k */
    float *kt;           /* method3: [d, L] K^T */
    float *blk;          /* [block, max(L, R)]: QA / KA block (shaw, method4) or region
                          * scores (method3) */
    float *blk_g;        /* method3: [block, d] */
    float *arow_grad;    /* method3: [d] gradient of a clipped-region table row */
} AttnWork;

/* Left end (exclusive) and right start of row i's band for clip distance c (see above). */
static inline void rel_split(int i, int c, int L, int *left_end, int *right_start) {
    int le = i - c + 1, rs = i + c;
    le = le < 0 ? 0 : (le > L ? L : le);
    rs = rs < le ? le : (rs > L ? L : rs);
    *left_end = le;
    *right_start = rs;
}

/* Lay out `scratch` (NULL: only measure; total_floats for s->threads threads). */
void attn_plan(AttnPlan *p, const AttnShape *s, float *scratch);
AttnWork attn_work(const AttnPlan *p, int thread);

/* Before the (b,h) loop: the w2 (methods 1, 2) or at (method3) copy of the table. */
void relpos_prepare(const AttnPlan *p, const float *table);

/* Scores of one (b,h), without the 1/sqrt(d) scale, into scores [L, L]:
 *   shaw, method4: writes only the relative terms (the caller adds q.k after);
 *   methods 1, 2: scores = raw (.) w;   method3: computes everything. */
void relpos_scores(const AttnPlan *p, const AttnWork *w, float *scores, const float *raw,
                   const float *qkv, const float *table, int b, int h);

/* Backward for one (b,h) in two steps. dscore [L, L] holds dL/d(unscaled scores).
 * relpos_backward_pre, before the caller writes dQ = dscore.K and dK = dscore^T.Q (not for
 *   method3): methods 1, 2: part[u] += dscore (.) raw, then dscore (.)= w (now dL/d(q.k)).
 * relpos_backward, after: shaw / method4 add their dQ, dK terms into d_qkv; method3 writes
 *   this (b,h)'s dQ and dK. Table gradients go into the slot partial `part`. */
void relpos_backward_pre(const AttnPlan *p, float *dscore, float *part, const float *raw);
void relpos_backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part,
                     float *d_qkv, const float *qkv, const float *table, int b, int h);

/* After the (b,h) loop: d_table += the slot partials, summed in a fixed order. */
void relpos_finish(const AttnPlan *p, float *d_table);
