/* RoPE (Su et al. 2021), half-split layout (GPT-NeoX, ModernBERT): q and k of every head rotated
 * by the token's index p in its row before the dot product, v not rotated:
 *   for t < d/2, theta_t = rope_theta^(-2t/d), c = cos(p theta_t), s = sin(p theta_t):
 *     x'_t       = x_t c - x_{t+d/2} s
 *     x'_{t+d/2} = x_{t+d/2} c + x_t s
 *   S_ij = scale * q'_i.k'_j  (= scale * q_i.R_{j-i} k_j: depends on j - i only)
 * Backward, R^T: g_t = g'_t c + g'_{t+d/2} s,  g_{t+d/2} = g'_{t+d/2} c - g'_t s.
 * The scheme rotates a (b,h)'s q and k into the thread's buffer (one pass, in cache) before the
 * core's GEMMs, and rotates back the dQ, dK those GEMMs wrote; cos and sin are built once per
 * step and length. */
#include <math.h>

#include "core/common.h"
#include "layers/attention_plan.h"

static void check(const AttnShape *s) {
    RP_CHECK((s->H / s->num_heads) % 2 == 0 && s->rope_theta > 0.0f,
             "attention: rope needs an even head width and rope_theta > 0, got %d and %g",
             s->H / s->num_heads, (double)s->rope_theta);
}

static void tables_lay_out(PosTables *t, const AttnShape *s, Arena *arena) {
    const size_t entries = (size_t)s->L * (size_t)(s->H / s->num_heads) / 2;
    t->cos = arena_take(arena, entries);
    t->sin = arena_take(arena, entries);
}

/* cos and sin of p theta_t for every position p: the unit complex number e^{i p theta_t} by
 * repeated multiplication with e^{i theta_t}, in double (after 64k positions the error is ~1e-11,
 * far below float's 6e-8), so the table costs 4 multiply-adds per entry instead of a sincos. */
static void tables_build(PosTables *tb, const AttnShape *sh, const float *table) {
    (void)table;
    const int d = sh->H / sh->num_heads, half = d / 2;
    for (int t = 0; t < half; t++) {
        const double theta = pow((double)sh->rope_theta, -2.0 * t / d);
        const double step_c = cos(theta), step_s = sin(theta);
        double c = 1.0, s = 0.0;
        for (int pos = 0; pos < sh->L; pos++) {
            tb->cos[(size_t)pos * half + t] = (float)c;
            tb->sin[(size_t)pos * half + t] = (float)s;
            const double next_c = c * step_c - s * step_s;
            s = s * step_c + c * step_s;
            c = next_c;
        }
    }
}

/* out = the rotated rows of one head: L rows of d at strides x_ld (in) and out_ld (out). */
static void rotate_rows(const AttnPlan *p, float *out, int out_ld, const float *x, int x_ld) {
    const int half = p->d / 2;
    for (int i = 0; i < p->L; i++) {
        const float *restrict c = p->tables.cos + (size_t)i * half, *restrict s = p->tables.sin + (size_t)i * half;
        const float *restrict lo = x + (size_t)i * x_ld, *restrict hi = lo + half;
        float *restrict out_lo = out + (size_t)i * out_ld, *restrict out_hi = out_lo + half;
#pragma omp simd
        for (int t = 0; t < half; t++) {
            out_lo[t] = lo[t] * c[t] - hi[t] * s[t];
            out_hi[t] = hi[t] * c[t] + lo[t] * s[t];
        }
    }
}

/* g = R^T g in place (the gradient of the unrotated rows from that of the rotated ones). */
static void rotate_rows_back(const AttnPlan *p, float *g, int ld) {
    const int half = p->d / 2;
    for (int i = 0; i < p->L; i++) {
        const float *restrict c = p->tables.cos + (size_t)i * half, *restrict s = p->tables.sin + (size_t)i * half;
        float *restrict lo = g + (size_t)i * ld, *restrict hi = lo + half;
#pragma omp simd
        for (int t = 0; t < half; t++) {
            const float a = lo[t], b = hi[t];
            lo[t] = a * c[t] + b * s[t];
            hi[t] = b * c[t] - a * s[t];
        }
    }
}

/* q, key := their rotated copies, contiguous [L, d] each in the thread's buffer */
static void rotate(const AttnPlan *p, const AttnWork *w, const float **q, const float **key, int *ld) {
    const size_t rows = (size_t)p->L * p->d;
    rotate_rows(p, w->rot, p->d, *q, *ld);
    rotate_rows(p, w->rot + rows, p->d, *key, *ld);
    *q = w->rot, *key = w->rot + rows, *ld = p->d;
}

static void rotate_back(const AttnPlan *p, float *dq, float *dkey, int ld) {
    rotate_rows_back(p, dq, ld);
    rotate_rows_back(p, dkey, ld);
}

static void work(const AttnPlan *p, AttnWork *w, Arena *arena) {
    w->rot = arena_take(arena, 2 * (size_t)p->L * p->d);
}

const PosScheme pos_rope = {
    .even_head_width = "which rotates pairs of dimensions",
    .transfer_added = "RoPE rotates every q and k, and it has no parameters that could start neutral",
    .transfer_lost = "the checkpoint's rotation of q and k (RoPE) is gone",
    .hf_lacks = "rotary position embedding",
    .hf_family = "ModernBERT / NeoBERT",
    .check = check,
    .work = work,
    .tables_lay_out = tables_lay_out,
    .tables_build = tables_build,
    .qk = POS_QK_PLAIN,
    .rotate = rotate,
    .rotate_back = rotate_back,
};
