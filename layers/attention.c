/* Attention core: per (b,h) in an OpenMP loop, S = Q.K^T (GEMM on the strided qkv), relative
 * terms (relpos.c), residual carry, mask, softmax, dropout, P.V. The math is in attention.h and
 * docs/attention.md; the scratch layout and index conventions in relpos.h. */
#include "layers/attention.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "layers/relpos.h"

#define MASK_PENALTY (-10000.0f)

const char *const rel_kind_names[] = {"none", "shaw", "method1", "method2", "method3", "method4", NULL};

const char *rel_kind_name(RelKind kind) { return enum_name(rel_kind_names, (int)kind); }

int attention_table_rows(RelKind rel, int k) {
    switch (rel) {
    case REL_NONE: return 0;
    case REL_METHOD1: return k + 1;
    default: return 2 * k + 1;
    }
}

int attention_table_cols(RelKind rel, int head_dim) {
    switch (rel) {
    case REL_NONE: return 0;
    case REL_METHOD1:
    case REL_METHOD2: return 1;
    default: return head_dim;
    }
}

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* One thread's buffers, taken from `arena` in a fixed order (attn_plan measures it). */
static AttnWork lay_out_work(const AttnPlan *p, Arena *arena) {
    size_t L = (size_t)p->L, d = (size_t)p->d;
    AttnWork w = {0};
    w.dscore = arena_take(arena, L * L);
    w.vec0 = arena_take(arena, L);
    w.vec1 = arena_take(arena, L);
    if (p->rel == REL_SHAW || p->rel == REL_METHOD4)
        w.blk = arena_take(arena, (size_t)p->block * (p->L > p->R ? p->L : p->R));
    if (p->rel == REL_METHOD3) {
        w.qs0 = arena_take(arena, L * d);
        w.qs2 = arena_take(arena, L * d);
        w.kt = arena_take(arena, L * d);
        w.blk = arena_take(arena, p->block * L);
        w.blk_g = arena_take(arena, p->block * d);
        w.arow_grad = arena_take(arena, d);
    }
    return w;
}

AttnWork attn_work(const AttnPlan *p, int thread) {
    Arena arena = arena_view(p->work + (size_t)thread * p->work_floats, p->work_floats);
    return lay_out_work(p, &arena);
}

/* Sum over blocks of T query rows of rows x reachable table rows: the multiply-adds / d of the
 * blocked QA (and, by symmetry, KA) GEMMs (see reach_block in relpos.c). */
static size_t reach_work(int L, int m, int T) {
    size_t work = 0;
    for (int i0 = 0; i0 < L; i0 += T) {
        int nb = T < L - i0 ? T : L - i0;
        int lo = i0 - (L - 1) + m, hi = i0 + nb - 1 + m;
        lo = lo > 0 ? lo : 0, hi = hi < 2 * m ? hi : 2 * m;
        work += (size_t)nb * (size_t)(hi - lo + 1);
    }
    return work;
}

void attn_plan(AttnPlan *p, const AttnShape *s, float *scratch) {
    RP_CHECK(s->B > 0 && s->L > 0 && s->num_heads > 0 && s->H > 0 && s->H % s->num_heads == 0,
             "attention: bad shape B=%d L=%d H=%d heads=%d (H must be a multiple of heads)", s->B,
             s->L, s->H, s->num_heads);
    RP_CHECK(s->rel == REL_NONE || s->k >= 1, "attention: relative k must be >= 1, got %d", s->k);
    *p = (AttnPlan){0};
    p->B = s->B, p->L = s->L, p->H = s->H, p->heads = s->num_heads;
    p->d = s->H / s->num_heads, p->BL = s->B * s->L, p->BH = s->B * s->num_heads, p->ld = 3 * s->H;
    p->rel = s->rel;
    p->k = s->rel == REL_NONE ? 0 : s->k;
    p->m = p->k < s->L - 1 ? p->k : s->L - 1;
    p->R = 2 * p->m + 1;
    p->at_ld = 2 * p->k + 1;
    p->scale = 1.0f / sqrtf((float)p->d);
    p->slots = p->BH < ATTN_SLOTS ? p->BH : ATTN_SLOTS;
    p->block = s->L / 4 < 16 ? 16 : (s->L / 4 > 64 ? 64 : s->L / 4);
    /* shaw/method4: a block of T rows reaches at most min(R, L+T-1) table rows, the first and
     * last blocks fewer. One GEMM over all L rows (fewer, larger calls) unless the blocks cut the
     * QA / KA work by at least a tenth (k = 64 at L = 128: 13%). */
    if ((p->rel == REL_SHAW || p->rel == REL_METHOD4) &&
        10 * reach_work(s->L, p->m, p->block) > 9 * (size_t)s->L * p->R)
        p->block = p->L;

    /* NULL scratch: measure. Otherwise the caller provides attention_scratch_floats() floats,
     * which is what this layout measures, so the view needs no bound of its own. */
    Arena arena = scratch ? arena_view(scratch, SIZE_MAX) : arena_measuring();
    size_t L = (size_t)p->L, d = (size_t)p->d, R = (size_t)p->R;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW:
    case REL_METHOD4:
        p->slot_floats = round16(R * d);
        break;
    case REL_METHOD1:
    case REL_METHOD2:
        p->w2 = arena_take(&arena, 2 * L - 1);
        p->slot_floats = round16(2 * L - 1);
        break;
    case REL_METHOD3:
        p->at = arena_take(&arena, d * p->at_ld);
        p->slot_floats = round16(R * d);
        break;
    }
    if (p->slot_floats)
        p->slot_grad = arena_take(&arena, p->slots * p->slot_floats);
    Arena one_thread = arena_measuring();
    lay_out_work(p, &one_thread);
    p->work_floats = one_thread.used;
    p->threads = s->threads > 0 ? s->threads : 1;
    p->work = arena_take(&arena, p->work_floats * (size_t)p->threads);
    p->total_floats = arena.used;
}

size_t attention_scratch_floats(const AttnShape *s) {
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

static void check_args(const AttnShape *s, const float *table, const float *raw_scores,
                       const float *carried) {
    RP_CHECK(s->rel == REL_NONE || table, "attention: relative mode %s needs a table",
             rel_kind_name(s->rel));
    RP_CHECK(!(s->rel == REL_METHOD1 || s->rel == REL_METHOD2) || raw_scores,
             "attention: relative mode %s needs raw_scores", rel_kind_name(s->rel));
    RP_CHECK(!s->residual || carried, "attention: residual attention needs the carried buffer");
    RP_CHECK(s->dropout >= 0.0f && s->dropout < 1.0f, "attention: dropout %g needs 0 <= p < 1",
             (double)s->dropout);
}

/* One query row: logits = scale*S (or carried_scale * C with C = [C +] scale*S) + mask penalty,
 * then the softmax in place. The carried update, the logits and their max are one pass over the
 * row; softmax_row_normalize makes the other two (exp and sum, scale). */
static void logits_softmax_row(float *restrict row, float *restrict carried_row,
                               const int *restrict key_mask, int L, float scale,
                               const AttnShape *s) {
    float max = -INFINITY;
    if (!carried_row) {
#pragma omp simd reduction(max : max)
        for (int j = 0; j < L; j++) {
            const float logit = scale * row[j] + (key_mask[j] ? 0.0f : MASK_PENALTY);
            row[j] = logit;
            max = logit > max ? logit : max;
        }
    } else {
        const float cs = s->carried_scale;
        if (s->first_layer) {
#pragma omp simd reduction(max : max)
            for (int j = 0; j < L; j++) {
                const float c = scale * row[j], logit = cs * c + (key_mask[j] ? 0.0f : MASK_PENALTY);
                carried_row[j] = c;
                row[j] = logit;
                max = logit > max ? logit : max;
            }
        } else {
#pragma omp simd reduction(max : max)
            for (int j = 0; j < L; j++) {
                const float c = carried_row[j] + scale * row[j];
                const float logit = cs * c + (key_mask[j] ? 0.0f : MASK_PENALTY);
                carried_row[j] = c;
                row[j] = logit;
                max = logit > max ? logit : max;
            }
        }
    }
    softmax_row_normalize(row, row, L, max);
}

static void forward_bh(const AttnPlan *p, const AttnWork *w, int bh, float *ctx, float *probs,
                       float *raw_scores, float *carried, const float *qkv,
                       const float *table, const int *mask, const AttnShape *s, uint64_t key) {
    const int L = p->L, d = p->d, ld = p->ld, b = bh / p->heads, h = bh % p->heads;
    const size_t sq = (size_t)L * L, off = (size_t)bh * sq;
    const float *q = qkv + (size_t)b * L * ld + (size_t)h * d, *k = q + p->H, *v = q + 2 * p->H;
    float *P = probs + off;
    float *raw = (p->rel == REL_METHOD1 || p->rel == REL_METHOD2) ? raw_scores + off : NULL;

    /* shaw, method4: the relative terms first, then S += Q.K^T (beta 1: no zeroing pass) */
    const int terms_first = p->rel == REL_SHAW || p->rel == REL_METHOD4;
    if (terms_first)
        relpos_scores(p, w, P, raw, qkv, table, b, h);
    if (p->rel != REL_METHOD3)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, L, d, 1.0f, q, ld, k, ld,
                    terms_first ? 1.0f : 0.0f, raw ? raw : P, L);
    if (p->rel != REL_NONE && !terms_first)
        relpos_scores(p, w, P, raw, qkv, table, b, h);
    for (int i = 0; i < L; i++)
        logits_softmax_row(P + (size_t)i * L, carried ? carried + off + (size_t)i * L : NULL,
                           mask + (size_t)b * L, L, p->scale, s);

    /* dropout(P) is not kept: it goes through the thread's [L, L] buffer (free in forward) and
     * backward recomputes it from P and the key */
    float *Pd = P;
    if (s->dropout > 0.0f) {
        Pd = w->dscore;
        dropout_span(Pd, P, sq, s->dropout, key, off);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, d, L, 1.0f, Pd, L, v, ld, 0.0f,
                ctx + (size_t)b * L * p->H + (size_t)h * d, p->H);
}

void attention_forward(float *ctx, float *probs, float *raw_scores, float *carried, float *scratch,
                       const float *qkv, const float *table, const int *mask, const AttnShape *s,
                       uint64_t dropout_key) {
    AttnPlan p;
    attn_plan(&p, s, scratch);
    check_args(s, table, raw_scores, carried);
    if (!s->residual)
        carried = NULL;
    relpos_prepare(&p, table);
#pragma omp parallel num_threads(team_size(&p))
    {
        const AttnWork w = attn_work(&p, omp_get_thread_num());
        /* dynamic: on a shared machine a descheduled thread's share is taken over by the other
         * threads instead of being waited for at the barrier (results do not depend on it) */
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < p.BH; bh++)
            forward_bh(&p, &w, bh, ctx, probs, raw_scores, carried, qkv, table, mask, s,
                       dropout_key);
    }
}

/* dS from dP for one (b,h): softmax backward, then the residual carry, then the 1/sqrt(d). */
static void score_grad_rows(float *restrict D, float *restrict d_carried, const float *restrict P,
                            int L, float scale, float carried_scale) {
    for (int i = 0; i < L; i++) {
        float *restrict g = D + (size_t)i * L;
        const float *restrict pr = P + (size_t)i * L;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < L; j++)
            dot += g[j] * pr[j];
        if (d_carried) {
            float *restrict dc = d_carried + (size_t)i * L;
            for (int j = 0; j < L; j++) {
                float c = dc[j] + carried_scale * pr[j] * (g[j] - dot);
                dc[j] = c;
                g[j] = scale * c;
            }
        } else {
            for (int j = 0; j < L; j++)
                g[j] = scale * pr[j] * (g[j] - dot);
        }
    }
}

static void backward_bh(const AttnPlan *p, const AttnWork *w, int bh, float *part, float *d_qkv,
                        float *d_carried, const float *d_ctx, const float *qkv, const float *table,
                        const float *probs, const float *raw_scores, const AttnShape *s,
                        uint64_t key) {
    const int L = p->L, d = p->d, ld = p->ld, H = p->H, b = bh / p->heads, h = bh % p->heads;
    const size_t sq = (size_t)L * L, off = (size_t)bh * sq;
    const size_t qoff = (size_t)b * L * ld + (size_t)h * d;
    const float *q = qkv + qoff, *k = q + H, *v = q + 2 * H;
    float *dq = d_qkv + qoff, *dk = dq + H, *dv = dq + 2 * H;
    const float *dctx = d_ctx + (size_t)b * L * H + (size_t)h * d;
    float *D = w->dscore;

    /* dV = Pd^T.dctx, Pd = dropout(P) recomputed into D (same key, same elements as forward);
     * then dPd = dctx.V^T overwrites D */
    const float *Pd = probs + off;
    if (s->dropout > 0.0f) {
        dropout_span(D, probs + off, sq, s->dropout, key, off);
        Pd = D;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L, d, L, 1.0f, Pd, L, dctx, H, 0.0f, dv,
                ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, L, d, 1.0f, dctx, H, v, ld, 0.0f, D,
                L);
    if (s->dropout > 0.0f)
        dropout_span(D, D, sq, s->dropout, key, off);
    score_grad_rows(D, d_carried ? d_carried + off : NULL, probs + off, L, p->scale,
                    s->carried_scale);
    if (p->rel == REL_METHOD1 || p->rel == REL_METHOD2)
        relpos_backward_pre(p, D, part, raw_scores + off);
    if (p->rel != REL_METHOD3) {
        /* dQ = dRaw.K;  dK = dRaw^T.Q  (overwrite; the relative terms add after) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, d, L, 1.0f, D, L, k, ld, 0.0f,
                    dq, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L, d, L, 1.0f, D, L, q, ld, 0.0f,
                    dk, ld);
    }
    if (p->rel == REL_SHAW || p->rel == REL_METHOD4 || p->rel == REL_METHOD3)
        relpos_backward(p, w, D, part, d_qkv, qkv, table, b, h);
}

void attention_backward(float *d_qkv, float *d_table, float *d_carried, float *scratch,
                        const float *d_ctx, const float *qkv, const float *table,
                        const float *probs, const float *raw_scores, const AttnShape *s,
                        uint64_t dropout_key) {
    AttnPlan p;
    attn_plan(&p, s, scratch);
    check_args(s, table, raw_scores, d_carried);
    RP_CHECK(s->rel == REL_NONE || d_table, "attention: relative mode %s needs d_table",
             rel_kind_name(s->rel));
    if (!s->residual)
        d_carried = NULL;
    relpos_prepare(&p, table);
#pragma omp parallel num_threads(team_size(&p))
    {
        const AttnWork w = attn_work(&p, omp_get_thread_num());
        /* Fixed (b,h) groups, so the table-gradient sums depend neither on the thread count nor on
         * which thread runs a slot (dynamic, as in the forward). */
#pragma omp for schedule(dynamic, 1)
        for (int slot = 0; slot < p.slots; slot++) {
            float *part = p.slot_grad ? p.slot_grad + (size_t)slot * p.slot_floats : NULL;
            if (part)
                memset(part, 0, p.slot_floats * sizeof(float));
            const int first = slot * p.BH / p.slots, last = (slot + 1) * p.BH / p.slots;
            for (int bh = first; bh < last; bh++)
                backward_bh(&p, &w, bh, part, d_qkv, d_carried, d_ctx, qkv, table, probs,
                            raw_scores, s, dropout_key);
        }
    }
    if (p.rel != REL_NONE)
        relpos_finish(&p, d_table);
}
