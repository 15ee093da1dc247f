/* The scratch plan of one attention call (attention_plan.h): shape-derived sizes, the row
 * block of the relative-term GEMMs, and the layout of the shared and per-thread buffers in the
 * caller's scratch. attention_scratch_floats (attention.c) measures the same layout. */
#include "layers/attention_plan.h"

#include <math.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/common.h"

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* One thread's buffers, taken from `arena` in a fixed order (attn_plan measures it). */
static AttnWork lay_out_work(const AttnPlan *p, Arena *arena) {
    size_t L = (size_t)p->L, d = (size_t)p->d;
    AttnWork w = {0};
    w.dscore = arena_take(arena, L * L);
    if (p->dropout)
        w.dropped = arena_take(arena, L * L);
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
    if (p->rel == REL_ROPE)
        w.rot = arena_take(arena, 2 * L * d);
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
    RP_CHECK(!rel_kind_uses_k(s->rel) || s->rel_k >= 1, "attention: relative k must be >= 1, got %d",
             s->rel_k);
    RP_CHECK(s->rel != REL_T5 || (s->t5_num_buckets >= 4 && s->t5_num_buckets % 2 == 0 &&
                                  s->t5_max_distance > s->t5_num_buckets / 4),
             "attention: t5 needs an even number of buckets >= 4 and a max distance > buckets/4, got "
             "%d and %d", s->t5_num_buckets, s->t5_max_distance);
    RP_CHECK(s->rel != REL_ROPE || ((s->H / s->num_heads) % 2 == 0 && s->rope_theta > 0.0f),
             "attention: rope needs an even head width and rope_theta > 0, got %d and %g",
             s->H / s->num_heads, (double)s->rope_theta);
    *p = (AttnPlan){0};
    p->B = s->B, p->L = s->L, p->H = s->H, p->heads = s->num_heads;
    p->d = s->H / s->num_heads, p->BL = s->B * s->L, p->BH = s->B * s->num_heads, p->ld = 3 * s->H;
    p->rel = s->rel;
    p->dropout = s->dropout > 0.0f;
    p->rel_k = rel_kind_uses_k(s->rel) ? s->rel_k : 0;
    p->t5_buckets = s->t5_num_buckets, p->t5_max_distance = s->t5_max_distance;
    p->rope_theta = s->rope_theta;
    p->m = p->rel_k < s->L - 1 ? p->rel_k : s->L - 1;
    p->R = 2 * p->m + 1;
    p->at_ld = 2 * p->rel_k + 1;
    p->scale = 1.0f / sqrtf((float)p->d);
    p->slots = p->BH < ATTN_SLOTS ? p->BH : ATTN_SLOTS;
    /* >= 32 rows: blocks of 16 multiplied at half the speed (32 x 48 and 32 x 64 steps, k = 64:
     * the op 3% and 15% faster with 32) */
    p->block = s->L / 4 < 32 ? 32 : (s->L / 4 > 64 ? 64 : s->L / 4);
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
    case REL_T5:
        p->bias2 = arena_take(&arena, (size_t)p->heads * (2 * L - 1));
        p->slot_floats = round16((size_t)p->heads * (2 * L - 1));
        break;
    case REL_ALIBI:
        p->bias2 = arena_take(&arena, (size_t)p->heads * (2 * L - 1));
        break;
    case REL_ROPE:
        p->rope_cos = arena_take(&arena, L * d / 2);
        p->rope_sin = arena_take(&arena, L * d / 2);
        break;
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
