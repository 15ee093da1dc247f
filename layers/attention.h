/* Multi-head self-attention core: scores, relative-position terms, residual (carried) scores,
 * padding mask, softmax, dropout, probabilities x values. The Q/K/V and output projections are
 * ordinary linear layers outside this op.
 *
 * Per head (d = H / num_heads, scale = 1/sqrt(d)), r(i,j) = clip(i-j, -k, k) + k,
 * s(i,j) = min(|i-j|, k):
 *   none    S_ij = scale * q_i.k_j
 *   shaw    S_ij = scale * (q_i.k_j + q_i.a_r)             table a [2k+1, d]
 *   method1 S_ij = scale * (q_i.k_j) * w_s                  table w [k+1]
 *   method2 S_ij = scale * (q_i.k_j) * w_r                  table w [2k+1]
 *   method3 S_ij = scale * sum_t q_it k_jt a_{r,t}          table a [2k+1, d]
 *   method4 S_ij = scale * (q_i.k_j + q_i.a_r + k_j.a_r)    table a [2k+1, d]
 *   t5      S_ij = scale * q_i.k_j + b[bucket(j-i), h]      table b [t5_num_buckets, heads]
 *   alibi   S_ij = scale * q_i.k_j - m_h |i-j|              no table (slopes m_h)
 *   rope    S_ij = scale * (R_i q_i).(R_j k_j)              no table (R_p: rotation by p)
 * (pos_t5.c, pos_alibi.c, pos_rope.c give the formulas of bucket, m_h and R_p.)
 * Residual attention (RealFormer): C_1 = S_1, C_l = C_{l-1} + S_l, and the logits are
 * carried_scale * C_l (carried_scale = 1, or 1/l for residual_attention_mean); otherwise the
 * logits are S. P = softmax(logits + M), M_ij = -10000 where key j is padding, else 0.
 * Dropout applies to P (never to C). ctx_i = sum_j dropout(P)_ij v_j, heads concatenated.
 *
 * Where each piece is computed: q_i.k_j, the carry, mask, softmax, dropout and P.V in
 * attention.c; each scheme's terms in its own file behind one row of functions (positions.h,
 * which lists them); the call's scratch layout in attention_plan.c. attention_reference.h is the same
 * op written straight from these formulas (double precision, element by element), the oracle
 * of the tests. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "layers/attention_shape.h"
#include "layers/positions.h"


/* Number of rows of a layer's own table for a scheme (0 for none, t5, alibi, rope), and its
 * width (d for vector tables, 1 for the scalar tables of methods 1 and 2): the row's table_shape.
 * t5's table is not a layer's: one [t5_num_buckets, heads] table is shared by every layer. */
int attention_table_rows(RelKind rel, int rel_k);
int attention_table_cols(RelKind rel, int head_dim);

/* Floats of scratch space attention_forward/backward need for this shape and s->threads. */
size_t attention_scratch_floats(const AttnShape *s);

/* An unpadded batch's scratch (attention_varlen.c): per thread the most one single-sequence call
 * of length l <= L needs (the blocking depends on l, so not the size at L), then per sequence the
 * partials of the table and qkv-bias gradients. Planned once from the largest shape s (seq_offsets
 * set, B and L the layout's; dropout and first_layer either way) and passed as AttnShape.varlen;
 * a call whose shape it does not cover (longer, more sequences or threads, another scheme, width,
 * precision or table source) is a fatal error. */
typedef struct AttnVarlenPlan {
    size_t per_thread;   /* one thread's scratch */
    size_t table_floats; /* the table gradient's partial of one sequence (rounded to 16) */
    size_t part_floats;  /* table | bias partial of one sequence */
    int threads, B, L;   /* the largest call covered */
    AttnShape planned;   /* the shape it was planned for (its layout fields) */
} AttnVarlenPlan;
AttnVarlenPlan attn_varlen_plan(const AttnShape *s);

/* qkv      [B*L, 3H]   row n = [q_n | k_n | v_n], head h at columns h*d within each part
 * table    the scheme's table as above (t5: the model's shared [t5_num_buckets, heads] table),
 *          or NULL for the schemes without one (none, alibi, rope)
 * mask     [B*L]        1 = real token, 0 = padding (as a key it gets -10000); NULL: all real
 * Unpadded (s->seq_offsets, attention_shape.h): qkv, d_qkv [T, 3H] and ctx, d_ctx [T, H] hold the
 * sequences' rows back to back; probs, raw_scores, carried, d_carried hold each (b,h)'s
 * [L_b, L_b] block back to back (sum_b heads L_b^2 floats); mask is unused. The op runs per
 * sequence as the padded one of shape [1, L_b] (the tables s->tables built for the longest L).
 * probs    [B, heads, L, L]  out: softmax probabilities P (saved for backward; dropout(P) is
 *          not stored: backward recomputes its mask from dropout_key, element e of probs keeping
 *          or dropping exactly as in forward)
 * raw_scores    [B, heads, L, L] out: q.k (unscaled), saved for methods 1 and 2; else unused/NULL
 * carried  [B, heads, L, L]  in/out: residual scores C (NULL unless s->residual)
 * ctx      [B*L, H]    out: attention output, heads concatenated
 * In a bf16 context Q|K|V may come in bf16 instead (s->qkv16, qkv NULL) and ctx go out in bf16
 * (s->ctx16, ctx NULL): attention_shape.h.
 * scratch  attention_scratch_floats() floats */
void attention_forward(float *ctx, float *probs, float *raw_scores, float *carried, float *scratch,
                       const float *qkv, const float *table, const int *mask, const AttnShape *s,
                       uint64_t dropout_key);

/* d_qkv    [B*L, 3H] out (overwrites)
 * d_qkv_bias [3H] accumulates (+=) sum_n d_qkv[n] (the gradient of the Q|K|V projection's bias),
 *          summed per (b,h) over its L rows where they are written, then over b in order: the
 *          same bits for any thread count. NULL: not computed.
 * d_table  table-shaped, accumulates (+=); NULL for none, alibi, rope. t5: the layers' calls
 *          add into the one shared gradient, each call's sum in a fixed order (per-slot
 *          partials), so the total over layers has the same bits for any thread count.
 * d_carried [B, heads, L, L] in/out (residual only): on entry dL/dC_{l+1} as carried down from
 *          the layer above (zero at the top layer); on exit dL/dC_l, which is also dL/dC_{l-1}
 *          for the layer below. NULL unless s->residual.
 * d_ctx    [B*L, H] in. Other arguments as saved by attention_forward (same dropout_key). */
void attention_backward(float *d_qkv, float *d_qkv_bias, float *d_table, float *d_carried,
                        float *scratch, const float *d_ctx, const float *qkv, const float *table,
                        const float *probs, const float *raw_scores, const AttnShape *s,
                        uint64_t dropout_key);
