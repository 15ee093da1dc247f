/* The position terms of the attention scores that are not truncated tables: T5's bucketed bias
 * (t5_bias.c), ALiBi's linear bias (alibi.c) and the rotation of RoPE (rope.c). The formulas are
 * above each function's code; how the op uses them is in attention.c and docs/attention.md.
 *
 *   term                       mode    forward                    backward
 *   b[bucket(j-i), h]          t5      t5_bias_prepare: bias2     score pass: diagonal sums of dS
 *                                      (added in the score pass)  t5_bias_finish: into d_table
 *   -m_h |i-j|                 alibi   alibi_prepare: bias2       (no parameters)
 *   (R_i q_i).(R_j k_j)        rope    rope_prepare: cos, sin;    rope_rotate_back of dQ, dK
 *                                      rope_rotate of q, k
 *
 * bias2 [heads, 2L-1] holds the added logit of head h at offset j - i = u - (L-1) (index u), so
 * row i of head h reads bias2 + h*(2L-1) + (L-1-i) at columns j. */
#pragma once

#include "layers/attention_plan.h"

/* T5's bidirectional bucket of the relative position rel = j - i (HuggingFace modeling_t5.py,
 * _relative_position_bucket, bidirectional=True), in [0, num_buckets). */
int t5_bucket(int rel, int num_buckets, int max_distance);

/* ALiBi's slope m_h of head h of num_heads (Press et al.'s reference code). */
double alibi_slope(int h, int num_heads);

/* Before the (b,h) loops of forward and backward. t5: p->bias2 from the [buckets, heads] table. */
void t5_bias_prepare(const AttnPlan *p, const float *table);
/* After the backward's loop: d_table[bucket(u-(L-1)), h] += the slot partials [heads, 2L-1] of
 * sum_{b, j-i=u-(L-1)} dS_ij, summed over the slots in order (the same bits for any thread
 * count). */
void t5_bias_finish(const AttnPlan *p, float *d_table);

/* alibi: p->bias2[h][u] = -m_h |u - (L-1)|. */
void alibi_prepare(const AttnPlan *p);

/* rope: p->rope_cos, p->rope_sin [L, d/2] = cos, sin of the angle p*theta_t. */
void rope_prepare(const AttnPlan *p);
/* out = the rotated rows of one head: L rows of d at strides x_ld (in) and out_ld (out). */
void rope_rotate(const AttnPlan *p, float *out, int out_ld, const float *x, int x_ld);
/* g = R^T g in place (the gradient of the unrotated rows from that of the rotated ones). */
void rope_rotate_back(const AttnPlan *p, float *g, int ld);
