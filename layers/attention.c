/* Attention core: per (b,h) in an OpenMP loop, the term q_i.k_j of S (one GEMM on the strided
 * qkv), the position scheme's terms (through its row, positions.h), residual carry, mask,
 * softmax, dropout, P.V; backward the same in reverse. The math is in attention.h and
 * docs/attention.md; the scratch layout and index conventions in attention_plan.h. */
#include "layers/attention.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "layers/attention_plan.h"
#include "layers/layers.h"

#define MASK_PENALTY (-10000.0f)

/* glibc >= 2.35 ships vector expf (libmvec); declaring it SIMD lets the softmax loop call the
 * 8-wide version (as in softmax.c). */
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
#pragma omp declare simd notinbranch
float expf(float);
#endif

int attention_table_rows(RelKind rel, int rel_k) {
    int rows, cols;
    pos_table_shape(rel, &(PosDims){.rel_k = rel_k, .head_dim = 1}, &rows, &cols);
    return pos_scheme(rel)->table_scope == POS_TABLE_LAYER ? rows : 0;
}

int attention_table_cols(RelKind rel, int head_dim) {
    int rows, cols;
    pos_table_shape(rel, &(PosDims){.rel_k = 1, .head_dim = head_dim}, &rows, &cols);
    return pos_scheme(rel)->table_scope == POS_TABLE_LAYER ? cols : 0;
}

size_t attention_scratch_floats(const AttnShape *s) {
    if (s->seq_offsets)
        return attn_varlen_scratch_floats(s);
    AttnPlan p;
    attn_plan(&p, s, NULL);
    return p.total_floats;
}

/* Team size of the parallel regions: the current thread count, at most the threads the scratch
 * holds work buffers for (the thread count may have been raised since it was laid out). */
static int team_size(const AttnPlan *p) {
    int threads = omp_get_max_threads();
    return threads < p->threads ? threads : p->threads;
}

static void check_args(const AttnPlan *p, const AttnShape *s, const float *qkv, const float *table,
                       const float *raw_scores, const float *carried) {
    RP_CHECK(p->scheme->table_scope == POS_TABLE_NONE || table,
             "attention: position scheme %s needs a table", rel_kind_name(s->rel));
    RP_CHECK(p->scheme->qk != POS_QK_RAW || raw_scores,
             "attention: position scheme %s needs raw_scores", rel_kind_name(s->rel));
    RP_CHECK(p->own_tables || p->tables.L >= s->L,
             "attention: position tables built for length %d, the call's is %d", p->tables.L, s->L);
    RP_CHECK(!s->residual || carried, "attention: residual attention needs the carried buffer");
    RP_CHECK(!p->bf16 || (s->lane >= 0 && gemm_lanes_reserved(s->gemm) >= s->lane + p->threads),
             "internal: attention: a bf16 context with %d lanes for lanes %d.. of %d threads",
             gemm_lanes_reserved(s->gemm), s->lane, p->threads);
    RP_CHECK(s->dropout >= 0.0f && s->dropout < 1.0f, "attention: dropout %g needs 0 <= p < 1",
             (double)s->dropout);
    const uint64_t drop_L = (uint64_t)(s->drop_L ? s->drop_L : s->L);
    RP_CHECK(s->drop_L == 0 || s->drop_L >= s->L, "attention: dropout numbering length %d below the "
             "call's length %d", s->drop_L, s->L);
    RP_CHECK(s->dropout == 0.0f ||
                 dropout_indices_fit((uint64_t)(s->drop_seq + s->B) * s->num_heads * drop_L * drop_L),
             "attention: B=%d x heads=%d x L=%d x L exceeds one dropout key's 2^32 mask indices",
             s->drop_seq + s->B, s->num_heads, (int)drop_L);
    RP_CHECK(p->bf16 ? (qkv != NULL) != (s->qkv16 != NULL) : qkv && !s->qkv16,
             "internal: attention: Q|K|V in fp32 (qkv) or, in a bf16 context only, in bf16 (qkv16): one of them");
}

/* The first pass over one query row: S = scale*row (+ bias, the scheme's bias2), logits = S (or
 * carried_scale * C with C = [C +] S) + mask penalty, into row; returns their max. Inlined
 * twice, with bias NULL and not, so neither copy tests bias inside its loops (and the NULL copy
 * is the loop of the modes without a bias, not one with a "+ 0"). */
static inline __attribute__((always_inline)) float
logits_pass(float *restrict row, float *restrict carried_row, const int *restrict key_mask,
            const float *restrict bias, int L, float scale, const AttnShape *s) {
    float max = -INFINITY;
    if (!carried_row) {
#pragma omp simd reduction(max : max)
        for (int j = 0; j < L; j++) {
            const float sj = bias ? scale * row[j] + bias[j] : scale * row[j];
            const float logit = sj + (!key_mask || key_mask[j] ? 0.0f : MASK_PENALTY);
            row[j] = logit;
            max = logit > max ? logit : max;
        }
    } else {
        const float cs = s->carried_scale;
        if (s->first_layer) {
#pragma omp simd reduction(max : max)
            for (int j = 0; j < L; j++) {
                const float c = bias ? scale * row[j] + bias[j] : scale * row[j];
                const float logit = cs * c + (!key_mask || key_mask[j] ? 0.0f : MASK_PENALTY);
                carried_row[j] = c;
                row[j] = logit;
                max = logit > max ? logit : max;
            }
        } else {
#pragma omp simd reduction(max : max)
            for (int j = 0; j < L; j++) {
                const float c = carried_row[j] + (bias ? scale * row[j] + bias[j] : scale * row[j]);
                const float logit = cs * c + (!key_mask || key_mask[j] ? 0.0f : MASK_PENALTY);
                carried_row[j] = c;
                row[j] = logit;
                max = logit > max ? logit : max;
            }
        }
    }
    return max;
}

/* logits_pass in four inlined copies: with and without a bias, with and without a mask (unpadded:
 * none). */
static float row_logits(float *restrict row, float *restrict carried_row, const int *restrict key_mask,
                        const float *restrict bias_row, int L, float scale, const AttnShape *s) {
    return key_mask ? (bias_row ? logits_pass(row, carried_row, key_mask, bias_row, L, scale, s)
                                : logits_pass(row, carried_row, key_mask, NULL, L, scale, s))
                    : (bias_row ? logits_pass(row, carried_row, NULL, bias_row, L, scale, s)
                                : logits_pass(row, carried_row, NULL, NULL, L, scale, s));
}

/* One query row with dropout: the logits (row_logits; bias_row = the row's bias2 or NULL), then the
 * softmax in place and dropped_row = dropout(P) (elements `first` .. first+L-1 of the mask). Three
 * passes over the row: the carried update, logits and their max; exp and sum; the scaling, which
 * also writes the dropped row. (Without dropout: softmax_rows.) */
static void logits_softmax_dropout_row(float *restrict row, float *restrict carried_row,
                                       float *restrict dropped_row, const int *restrict key_mask,
                                       const float *restrict bias_row, int L, float scale,
                                       const AttnShape *s, uint64_t dropout_key, size_t first) {
    const float max = row_logits(row, carried_row, key_mask, bias_row, L, scale, s);
    if (!isfinite(max)) { /* a row of -inf or NaN: as softmax_row_normalize says, then drop */
        softmax_row_probs(row, row, L, max);
        dropout_span(dropped_row, row, (size_t)L, s->dropout, dropout_key, first);
        return;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < L; j++) {
        const float e = expf(row[j] - max);
        row[j] = e;
        sum += e;
    }
    /* P = e / sum; dropout(P) = keep ? P / (1-p) : +0, the bit mask of dropout_span */
    const float inv_sum = 1.0f / sum, keep_scale = 1.0f / (1.0f - s->dropout);
    const uint32_t threshold = hash_threshold(s->dropout);
#pragma omp simd
    for (int j = 0; j < L; j++) {
        const float pj = row[j] * inv_sum;
        union {
            float f;
            uint32_t u;
        } kept = {pj * keep_scale};
        kept.u &= 0u - (uint32_t)(hash_bits24(dropout_key, (uint32_t)first + (uint32_t)j) >= threshold);
        row[j] = pj;
        dropped_row[j] = kept.f;
    }
}

/* Mask index of element (i, 0) of (b,h)'s scores (the AttnShape's dropout numbering). */
static size_t dropout_row_first(const AttnPlan *p, const AttnShape *s, int bh, int i) {
    const size_t Ld = (size_t)(s->drop_L ? s->drop_L : p->L);
    return (((size_t)s->drop_seq * p->heads + (size_t)bh) * Ld + (size_t)i) * Ld;
}

/* The (b,h)'s fp32 q, k as the scores read them (*qk_ld their row stride): qkv's rows, or with
 * shape->qkv16 their exact expansion in w->qk32 (schemes that read fp32 q, k; NULL otherwise); then
 * the scheme's rotation. bf16: *q16, *k16 (stride *ld16) the products' operands: shape->qkv16's rows
 * in place, or rounded into w->q16, k16 here (fp32 qkv, or rotated q, k). */
static void head_qk(const AttnPlan *p, const AttnWork *w, const float *qkv, int b, int h, const float **q,
                    const float **key, int *qk_ld, const bf16 **q16, const bf16 **k16, int *ld16) {
    const PosScheme *sc = p->scheme;
    if (p->shape->qkv16 && w->qk32)
        attn_expand_qk(p, w, b, h);
    *q = attn_head32(p, w, qkv, b, h, 0, qk_ld);
    *key = attn_head32(p, w, qkv, b, h, 1, qk_ld);
    if (sc->rotate)
        sc->rotate(p, w, q, key, qk_ld);
    if (!p->bf16 || sc->qk == POS_QK_SCHEME)
        return;
    *q16 = attn_head16(p, w, b, h, 0, ld16);
    *k16 = attn_head16(p, w, b, h, 1, ld16);
    if (*q16 == w->q16) { /* rounded per (b,h) */
        attn_to_bf16(w->q16, *q, p->L, p->d, *qk_ld);
        attn_to_bf16(w->k16, *key, p->L, p->d, *qk_ld);
    }
}

/* bf16: the (b,h)'s v as P.V reads it (stride *ld16): shape->qkv16's rows, or rounded into w->v16. */
static const bf16 *head_v16(const AttnPlan *p, const AttnWork *w, const float *qkv, int b, int h, int *ld16) {
    const bf16 *v16 = attn_head16(p, w, b, h, 2, ld16);
    if (v16 == w->v16)
        attn_to_bf16(w->v16, qkv + (size_t)b * p->L * p->ld + (size_t)h * p->d + 2 * p->H, p->L, p->d, p->ld);
    return v16;
}

/* S [L, L] = P without dropout, 4 rows at a time: their logits (row_logits: carried scores C [L, L],
 * the key mask [L], the bias bias2 centred on row 0, each NULL if none), then their softmax
 * together; bf16 runs also round the rows into w->s16 while they are in cache. */
static void softmax_rows(const AttnPlan *p, const AttnWork *w, float *S, float *C, const int *mask,
                         const float *bias, const AttnShape *s) {
    const int L = p->L;
    for (int i0 = 0; i0 < L; i0 += 4) {
        const int n = L - i0 < 4 ? L - i0 : 4;
        float *rows = S + (size_t)i0 * L;
        if (!C && !mask && !bias) { /* bf16's plain rows: the logits pass fused into the softmax */
            softmax_scaled_rows_probs(rows, n, L, p->scale);
        } else {
            float max[4];
            for (int r = 0; r < n; r++) {
                const int i = i0 + r;
                max[r] = row_logits(S + (size_t)i * L, C ? C + (size_t)i * L : NULL, mask, bias ? bias - i : NULL,
                                    L, p->scale, s);
            }
            softmax_rows_probs(rows, n, L, max);
        }
        if (p->bf16)
            attn_to_bf16(w->s16 + (size_t)i0 * L, rows, n, L, L);
    }
}

static void forward_bh(const AttnPlan *p, const AttnWork *w, int bh, float *ctx, float *probs,
                       float *raw_scores, float *carried, const float *qkv,
                       const float *table, const int *mask, const AttnShape *s,
                       uint64_t dropout_key) {
    const int L = p->L, d = p->d, ld = p->ld, b = bh / p->heads, h = bh % p->heads;
    const PosScheme *sc = p->scheme;
    const size_t sq = (size_t)L * L, off = (size_t)bh * sq;
    float *S = probs + off; /* the unscaled scores, then the logits, then P */
    const float *q, *key;
    const bf16 *q16 = NULL, *k16 = NULL;
    int qk_ld, ld16 = d; /* row strides of q and key (qkv's, or a thread copy's), of q16 and k16 */
    head_qk(p, w, qkv, b, h, &q, &key, &qk_ld, &q16, &k16, &ld16);
    const int Lt = p->tables.L; /* the tables' length, >= L */
    const float *bias = p->tables.bias2 ? p->tables.bias2 + (size_t)h * (2 * Lt - 1) + (Lt - 1) : NULL;
    float *raw = sc->qk == POS_QK_RAW ? raw_scores + off : NULL;

    /* POS_QK_ADDED: the scheme's terms first, then the term q_i.k_j added by S += Q.K^T (beta 1:
     * no zeroing pass). POS_QK_RAW: raw = Q.K^T, then S from raw. POS_QK_SCHEME: S whole. */
    const int lane = s->lane + omp_get_thread_num();
    if (sc->qk == POS_QK_ADDED)
        sc->scores(p, w, S, raw, qkv, table, b, h);
    if (sc->qk != POS_QK_SCHEME && p->bf16) {
        gemm_lane(s->gemm, lane, GEMM_N, GEMM_T, L, L, d, q16, ld16, k16, ld16,
                  sc->qk == POS_QK_ADDED ? 1.0f : 0.0f, raw ? raw : S, L);
    } else if (sc->qk != POS_QK_SCHEME) {
        gemm_f32(GEMM_N, GEMM_T, L, L, d, 1.0f, q, qk_ld, key, qk_ld,
                    sc->qk == POS_QK_ADDED ? 1.0f : 0.0f, raw ? raw : S, L);
    }
    if (sc->qk == POS_QK_RAW || sc->qk == POS_QK_SCHEME)
        sc->scores(p, w, S, raw, qkv, table, b, h);
    /* dropout(P) is not kept: it goes through the thread's [L, L] buffer, and backward
     * recomputes it from P and dropout_key */
    float *dropped = s->dropout > 0.0f ? w->dropped : NULL;
    if (!carried && !dropped && !mask && !bias && !p->bf16) /* the plain rows: all in one call */
        softmax_scaled_rows_probs(S, L, L, p->scale);
    else if (!dropped)
        softmax_rows(p, w, S, carried ? carried + off : NULL, mask ? mask + (size_t)b * L : NULL, bias, s);
    for (int i = 0; i < L && dropped; i++) {
        logits_softmax_dropout_row(S + (size_t)i * L, carried ? carried + off + (size_t)i * L : NULL,
                                   dropped + (size_t)i * L, mask ? mask + (size_t)b * L : NULL,
                                   bias ? bias - i : NULL, L, p->scale, s, dropout_key,
                                   dropout_row_first(p, s, bh, i));
        if (p->bf16) /* the row of dropout(P) in bf16 while it is in cache */
            attn_to_bf16(w->s16 + (size_t)i * L, dropped + (size_t)i * L, 1, L, L);
    }
    const float *Pd = dropped ? dropped : S;
    const size_t ctx_off = (size_t)b * L * p->H + (size_t)h * d;
    if (p->bf16) {
        int v_ld16;
        const bf16 *v16 = head_v16(p, w, qkv, b, h, &v_ld16);
        if (!s->ctx16) {
            gemm_lane(s->gemm, lane, GEMM_N, GEMM_N, L, d, L, w->s16, L, v16, v_ld16, 0.0f, ctx + ctx_off, p->H);
            return;
        }
        gemm_lane(s->gemm, lane, GEMM_N, GEMM_N, L, d, L, w->s16, L, v16, v_ld16, 0.0f, w->ctx32, d);
        for (int i = 0; i < L; i++) { /* the head's block of ctx16, rounded */
            const float *restrict x = w->ctx32 + (size_t)i * d;
            bf16 *restrict y = s->ctx16 + ctx_off + (size_t)i * p->H;
#pragma omp simd
            for (int t = 0; t < d; t++)
                y[t] = bf16_from_float(x[t]);
        }
    } else {
        const float *v = qkv + (size_t)b * L * ld + (size_t)h * d + 2 * p->H;
        gemm_f32(GEMM_N, GEMM_N, L, d, L, 1.0f, Pd, L, v, ld, 0.0f, ctx + ctx_off, p->H);
    }
}

/* Before a (b,h) loop: the copy of the layer's table the scheme reads, and the length-only
 * tables when the caller did not build them once for the step. */
static void prepare(AttnPlan *p, const AttnShape *s, const float *table) {
    if (p->scheme->prepare)
        p->scheme->prepare(p, table);
    if (p->own_tables)
        pos_tables_build(&p->tables, s, table);
}

/* One thread's part of the forward's (b,h) loop in a team, or all of it alone (no region:
 * omp_region_worthwhile; a plain loop, since worksharing may not nest in the caller's). */
static void forward_team(const AttnPlan *p, int alone, float *ctx, float *probs, float *raw_scores, float *carried,
                         const float *qkv, const float *table, const int *mask, const AttnShape *s,
                         uint64_t dropout_key) {
    const AttnWork w = attn_work(p, omp_get_thread_num());
    if (alone) {
        for (int bh = 0; bh < p->BH; bh++)
            forward_bh(p, &w, bh, ctx, probs, raw_scores, carried, qkv, table, mask, s, dropout_key);
        return;
    }
    /* dynamic: on a shared machine a descheduled thread's share is taken over by the other
     * threads instead of being waited for at the barrier (results do not depend on it) */
#pragma omp for schedule(dynamic, 1)
    for (int bh = 0; bh < p->BH; bh++)
        forward_bh(p, &w, bh, ctx, probs, raw_scores, carried, qkv, table, mask, s, dropout_key);
}

void attention_forward(float *ctx, float *probs, float *raw_scores, float *carried, float *scratch,
                       const float *qkv, const float *table, const int *mask, const AttnShape *s,
                       uint64_t dropout_key) {
    if (s->seq_offsets) { /* unpadded: attention_varlen.c */
        attn_varlen_forward(ctx, probs, raw_scores, carried, scratch, qkv, table, s, dropout_key);
        return;
    }
    AttnPlan p;
    attn_plan(&p, s, scratch);
    check_args(&p, s, qkv, table, raw_scores, carried);
    RP_CHECK(p.bf16 ? (ctx != NULL) != (s->ctx16 != NULL) : ctx && !s->ctx16,
             "internal: attention: ctx in fp32 (ctx) or, in a bf16 context only, in bf16 (ctx16): one of them");
    if (!s->residual)
        carried = NULL;
    prepare(&p, s, table);
    const int team = team_size(&p);
    if (omp_region_worthwhile(team)) {
#pragma omp parallel num_threads(team)
        forward_team(&p, 0, ctx, probs, raw_scores, carried, qkv, table, mask, s, dropout_key);
    } else {
        forward_team(&p, 1, ctx, probs, raw_scores, carried, qkv, table, mask, s, dropout_key);
    }
}

/* Fetch x [n] into the cache ahead of its use (a hint: no fault past an allocation). */
static void prefetch_floats(const float *x, size_t n) {
    for (size_t e = 0; e < n; e += 16)
        __builtin_prefetch(x + e, 0, 3);
}

static void backward_bh(const AttnPlan *p, const AttnWork *w, int bh, float *part, float *d_qkv,
                        float *bias_sums, float *d_carried, const float *d_ctx, const float *qkv,
                        const float *table, const float *probs, const float *raw_scores,
                        const AttnShape *s, uint64_t dropout_key) {
    const int L = p->L, d = p->d, ld = p->ld, H = p->H, b = bh / p->heads, h = bh % p->heads;
    const size_t sq = (size_t)L * L, off = (size_t)bh * sq;
    const PosScheme *sc = p->scheme;
    const size_t qoff = (size_t)b * L * ld + (size_t)h * d;
    float *dq = d_qkv + qoff, *dkey = dq + H, *dv = dq + 2 * H;
    const float *q, *key; /* the forward's (rotated) q, k, recomputed */
    const bf16 *q16 = NULL, *k16 = NULL;
    int qk_ld, ld16 = d;
    head_qk(p, w, qkv, b, h, &q, &key, &qk_ld, &q16, &k16, &ld16);
    const float *dctx = d_ctx + (size_t)b * L * H + (size_t)h * d;
    float *D = w->dscore;
    /* P was written by the forward long ago (L2 or L3 by now): the next (b,h)'s is fetched while
     * this one computes, the first's while its dPd product runs (below) */
    if (bh == 0)
        prefetch_floats(probs + off, sq);
    if (bh + 1 < p->BH)
        prefetch_floats(probs + off + sq, sq);

    /* dV = Pd^T.dctx, Pd = dropout(P) recomputed (the forward's dropout_key and element
     * indices); dPd = dctx.V^T into D */
    float *Pd = NULL;
    if (s->dropout > 0.0f) {
        Pd = w->dropped;
        for (int i = 0; i < L; i++)
            dropout_span(Pd + (size_t)i * L, probs + off + (size_t)i * L, (size_t)L, s->dropout,
                         dropout_key, dropout_row_first(p, s, bh, i));
    }
    const int lane = s->lane + omp_get_thread_num();
    float *diag = sc->bias_grad ? part + (size_t)h * (2 * L - 1) : NULL;
    if (p->bf16) { /* dPd first; the softmax backward's pass writes bf16 Pd (for dV) and dS */
        int v_ld16;
        const bf16 *v16 = head_v16(p, w, qkv, b, h, &v_ld16);
        attn_to_bf16(w->g16, dctx, L, d, H);
        gemm_lane(s->gemm, lane, GEMM_N, GEMM_T, L, L, d, w->g16, d, v16, v_ld16, 0.0f, D, L);
        attn_score_grad_rows(D, d_carried ? d_carried + off : NULL, diag, w->p16, sc->backward_raw ? NULL : w->s16,
                             probs + off, Pd, L, p->scale, s->carried_scale);
        gemm_lane(s->gemm, lane, GEMM_T, GEMM_N, L, d, L, w->p16, L, w->g16, d, 0.0f, dv, ld);
    } else {
        gemm_f32(GEMM_N, GEMM_T, L, L, d, 1.0f, dctx, H, qkv + qoff + 2 * H, ld, 0.0f, D, L);
        gemm_f32(GEMM_T, GEMM_N, L, d, L, 1.0f, Pd ? Pd : probs + off, L, dctx, H, 0.0f, dv, ld);
        attn_score_grad_rows(D, d_carried ? d_carried + off : NULL, diag, NULL, NULL, probs + off, Pd, L, p->scale,
                             s->carried_scale);
    }
    if (sc->backward_raw) {
        sc->backward_raw(p, D, part, raw_scores + off);
        if (p->bf16) /* dRaw, the q.k term's gradient: rounded after the scheme's pass */
            attn_to_bf16(w->s16, D, L, L, L);
    }
    if (sc->qk != POS_QK_SCHEME && p->bf16) {
        gemm_lane(s->gemm, lane, GEMM_N, GEMM_N, L, d, L, w->s16, L, k16, ld16, 0.0f, dq, ld);
        gemm_lane(s->gemm, lane, GEMM_T, GEMM_N, L, d, L, w->s16, L, q16, ld16, 0.0f, dkey, ld);
    } else if (sc->qk != POS_QK_SCHEME) {
        /* term q_i.k_j: dQ = dR.K;  dK = dR^T.Q  (overwrite; the scheme's terms add after) */
        gemm_f32(GEMM_N, GEMM_N, L, d, L, 1.0f, D, L, key, qk_ld, 0.0f,
                 dq, ld);
        gemm_f32(GEMM_T, GEMM_N, L, d, L, 1.0f, D, L, q, qk_ld, 0.0f,
                 dkey, ld);
    }
    if (sc->backward)
        sc->backward(p, w, D, part, d_qkv, qkv, table, b, h);
    if (sc->rotate_back) /* dQ, dK of the unrotated q, k from those of the rotated ones */
        sc->rotate_back(p, dq, dkey, ld);
    if (bias_sums)
        attn_head_column_sums(bias_sums + (size_t)bh * 3 * d, dq, L, d, H, ld);
}

/* Slot `slot` of the backward: its fixed group of (b,h), into its own partial. */
static void backward_slot(const AttnPlan *p, const AttnWork *w, int slot, float *d_qkv, float *d_qkv_bias,
                          float *d_carried, const float *d_ctx, const float *qkv, const float *table,
                          const float *probs, const float *raw_scores, const AttnShape *s, uint64_t dropout_key) {
    float *part = p->slot_grad ? p->slot_grad + (size_t)slot * p->slot_floats : NULL;
    if (part)
        memset(part, 0, p->slot_floats * sizeof(float));
    const int first = slot * p->BH / p->slots, last = (slot + 1) * p->BH / p->slots;
    for (int bh = first; bh < last; bh++)
        backward_bh(p, w, bh, part, d_qkv, d_qkv_bias ? p->bias_part : NULL, d_carried, d_ctx, qkv, table, probs,
                    raw_scores, s, dropout_key);
}

/* One thread's slots in a team, or all of them alone (as forward_team). */
static void backward_team(const AttnPlan *p, int alone, float *d_qkv, float *d_qkv_bias, float *d_carried,
                          const float *d_ctx, const float *qkv, const float *table, const float *probs,
                          const float *raw_scores, const AttnShape *s, uint64_t dropout_key) {
    const AttnWork w = attn_work(p, omp_get_thread_num());
    if (alone) {
        for (int slot = 0; slot < p->slots; slot++)
            backward_slot(p, &w, slot, d_qkv, d_qkv_bias, d_carried, d_ctx, qkv, table, probs, raw_scores, s,
                          dropout_key);
        return;
    }
    /* Fixed (b,h) groups, so the table-gradient sums depend neither on the thread count nor on
     * which thread runs a slot (dynamic, as in the forward). */
#pragma omp for schedule(dynamic, 1)
    for (int slot = 0; slot < p->slots; slot++)
        backward_slot(p, &w, slot, d_qkv, d_qkv_bias, d_carried, d_ctx, qkv, table, probs, raw_scores, s,
                      dropout_key);
}

void attention_backward(float *d_qkv, float *d_qkv_bias, float *d_table, float *d_carried,
                        float *scratch, const float *d_ctx, const float *qkv, const float *table,
                        const float *probs, const float *raw_scores, const AttnShape *s,
                        uint64_t dropout_key) {
    if (s->seq_offsets) { /* unpadded: attention_varlen.c */
        attn_varlen_backward(d_qkv, d_qkv_bias, d_table, d_carried, scratch, d_ctx, qkv, table, probs, raw_scores,
                             s, dropout_key);
        return;
    }
    AttnPlan p;
    attn_plan(&p, s, scratch);
    check_args(&p, s, qkv, table, raw_scores, d_carried);
    RP_CHECK(p.scheme->table_scope == POS_TABLE_NONE || d_table,
             "attention: position scheme %s needs d_table", rel_kind_name(s->rel));
    if (!s->residual)
        d_carried = NULL;
    prepare(&p, s, table);
    const int team = team_size(&p);
    if (omp_region_worthwhile(team)) {
#pragma omp parallel num_threads(team)
        backward_team(&p, 0, d_qkv, d_qkv_bias, d_carried, d_ctx, qkv, table, probs, raw_scores, s, dropout_key);
    } else {
        backward_team(&p, 1, d_qkv, d_qkv_bias, d_carried, d_ctx, qkv, table, probs, raw_scores, s, dropout_key);
    }
    if (p.scheme->finish)
        p.scheme->finish(&p, d_table);
    if (!d_qkv_bias)
        return;
    /* column part*H + h*d + t of the bias: bias_part[b, h][part*d + t] summed over b in order */
    const size_t head_stride = (size_t)p.heads * 3 * p.d;
    for (int h = 0; h < p.heads; h++)
        for (int part = 0; part < 3; part++) {
            const float *sums = p.bias_part + ((size_t)h * 3 + part) * p.d;
            float *db = d_qkv_bias + (size_t)part * p.H + (size_t)h * p.d;
            for (int t = 0; t < p.d; t++) {
                float total = 0.0f;
                for (int b = 0; b < p.B; b++)
                    total += sums[(size_t)b * head_stride + t];
                db[t] += total;
            }
        }
}
