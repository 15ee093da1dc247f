/* The scratch plan of one attention call (attention_plan.h): shape-derived sizes, the row
 * block of the relative-term GEMMs, and the layout of the shared and per-thread buffers in the
 * caller's scratch (the scheme's own through its plan and work hooks, positions.h). attention_scratch_floats (attention.c) measures the same layout. */
#include "layers/attention_plan.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/gemm.h"

/* One thread's buffers, taken from `arena` in a fixed order (attn_plan measures it). */
static AttnWork lay_out_work(const AttnPlan *p, Arena *arena) {
    const size_t L = (size_t)p->L;
    AttnWork w = {0};
    w.dscore = arena_take(arena, L * L);
    if (p->dropout)
        w.dropped = arena_take(arena, L * L);
    w.vec0 = arena_take(arena, L);
    w.vec1 = arena_take(arena, L);
    if (p->bf16) { /* bf16 [n] in n/2 floats, rounded up */
        const size_t Ld = L * (size_t)p->d;
        w.q16 = (bf16 *)arena_take(arena, (Ld + 1) / 2);
        w.k16 = (bf16 *)arena_take(arena, (Ld + 1) / 2);
        w.v16 = (bf16 *)arena_take(arena, (Ld + 1) / 2);
        w.g16 = (bf16 *)arena_take(arena, (Ld + 1) / 2);
        w.s16 = (bf16 *)arena_take(arena, (L * L + 1) / 2);
        w.p16 = (bf16 *)arena_take(arena, (L * L + 1) / 2);
        w.ctx32 = arena_take(arena, Ld);
    }
    if (attn_needs_qk32(p))
        w.qk32 = arena_take(arena, 2 * L * (size_t)p->d);
    if (p->scheme->work)
        p->scheme->work(p, &w, arena);
    return w;
}

int attn_needs_qk32(const AttnPlan *p) {
    return p->bf16 && (p->scheme->rotate || p->scheme->qk == POS_QK_SCHEME);
}

static size_t head_offset(const AttnPlan *p, int b, int h) {
    return (size_t)b * p->L * p->ld + (size_t)h * p->d;
}

void attn_expand_qk(const AttnPlan *p, const AttnWork *w, int b, int h) {
    const int L = p->L, d = p->d;
    const bf16 *q16 = p->shape->qkv16 + head_offset(p, b, h);
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < L; i++) {
            const bf16 *restrict x = q16 + (size_t)part * p->H + (size_t)i * p->ld;
            float *restrict y = w->qk32 + ((size_t)part * L + i) * d;
#pragma omp simd
            for (int t = 0; t < d; t++)
                y[t] = bf16_to_float(x[t]);
        }
}

const float *attn_head32(const AttnPlan *p, const AttnWork *w, const float *qkv, int b, int h, int part, int *ld) {
    if (!p->shape->qkv16) {
        *ld = p->ld;
        return qkv + head_offset(p, b, h) + (size_t)part * p->H;
    }
    *ld = p->d;
    return w->qk32 ? w->qk32 + (size_t)part * p->L * p->d : NULL;
}

const bf16 *attn_head16(const AttnPlan *p, const AttnWork *w, int b, int h, int part, int *ld16) {
    if (p->shape->qkv16 && !(part < 2 && p->scheme->rotate)) {
        *ld16 = p->ld;
        return p->shape->qkv16 + head_offset(p, b, h) + (size_t)part * p->H;
    }
    *ld16 = p->d;
    return part == 0 ? w->q16 : part == 1 ? w->k16 : w->v16;
}

void attn_product(const AttnPlan *p, GemmOp ta, GemmOp tb, int M, int N, int K, AttnOperand A, AttnOperand B,
                  float beta, float *C, int ldc) {
    if (p->bf16)
        gemm_lane(p->shape->gemm, p->shape->lane + omp_get_thread_num(), ta, tb, M, N, K, A.b16, A.ld16, B.b16, B.ld16, beta, C, ldc);
    else
        gemm_f32(ta, tb, M, N, K, 1.0f, A.f32, A.ld, B.f32, B.ld, beta, C, ldc);
}

void attn_to_bf16(bf16 *restrict out, const float *restrict in, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *restrict x = in + (size_t)r * ld;
        bf16 *restrict y = out + (size_t)r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            y[c] = bf16_from_float(x[c]);
    }
}

AttnWork attn_work(const AttnPlan *p, int thread) {
    Arena arena = arena_view(p->work + (size_t)thread * p->work_floats, p->work_floats);
    return lay_out_work(p, &arena);
}

void attn_plan(AttnPlan *p, const AttnShape *s, float *scratch) {
    RP_CHECK(s->B > 0 && s->L > 0 && s->num_heads > 0 && s->H > 0 && s->H % s->num_heads == 0,
             "attention: bad shape B=%d L=%d H=%d heads=%d (H must be a multiple of heads)", s->B,
             s->L, s->H, s->num_heads);
    const PosScheme *scheme = pos_scheme(s->rel);
    if (scheme->check)
        scheme->check(s);
    *p = (AttnPlan){0};
    p->B = s->B, p->L = s->L, p->H = s->H, p->heads = s->num_heads;
    p->d = s->H / s->num_heads, p->BL = s->B * s->L, p->BH = s->B * s->num_heads, p->ld = 3 * s->H;
    p->shape = s, p->scheme = scheme;
    p->dropout = s->dropout > 0.0f;
    p->bf16 = gemm_precision(s->gemm) == PRECISION_BF16;
    p->rel_k = scheme->uses_k ? s->rel_k : 0;
    p->m = p->rel_k < s->L - 1 ? p->rel_k : s->L - 1;
    p->R = 2 * p->m + 1;
    p->at_ld = 2 * p->rel_k + 1;
    p->scale = 1.0f / sqrtf((float)p->d);
    p->slots = p->BH < ATTN_SLOTS ? p->BH : ATTN_SLOTS;
    /* >= 32 rows: blocks of 16 multiplied at half the speed (32 x 48 and 32 x 64 steps, k = 64:
     * the op 3% and 15% faster with 32) */
    p->block = s->L / 4 < 32 ? 32 : (s->L / 4 > 64 ? 64 : s->L / 4);

    /* NULL scratch: measure. Otherwise the caller provides attention_scratch_floats() floats,
     * which is what this layout measures, so the view needs no bound of its own. */
    Arena arena = scratch ? arena_view(scratch, SIZE_MAX) : arena_measuring();
    const size_t d = (size_t)p->d;
    if (scheme->plan)
        scheme->plan(p, &arena);
    /* the length-only tables: the caller's (built once per step), or the call's own */
    if (s->tables) {
        p->tables = *s->tables;
    } else {
        pos_tables_lay_out(&p->tables, s, &arena);
        p->own_tables = 1;
    }
    if (p->slot_floats)
        p->slot_grad = arena_take(&arena, p->slots * p->slot_floats);
    p->bias_part = arena_take(&arena, (size_t)p->BH * 3 * d);
    Arena one_thread = arena_measuring();
    lay_out_work(p, &one_thread);
    p->work_floats = one_thread.used;
    p->threads = s->threads > 0 ? s->threads : 1;
    p->work = arena_take(&arena, p->work_floats * (size_t)p->threads);
    p->total_floats = arena.used;
}
