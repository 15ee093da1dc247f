/* Internal to layers/attention.c: the relative-position terms of the scores (relpos.c), named
 * after the terms of the formulas in attention.h and docs/attention.md, on the plan and index
 * conventions of attention_plan.h. Per (b,h), S is the score matrix [L, L] without the
 * 1/sqrt(d) scale; q, key are the head's rows of qkv (stride p->ld).
 *
 *   term                 modes              forward               backward
 *   q_i.a_r              shaw, method4      query_table_term      query_table_grads
 *   k_j.a_r              method4            key_table_term        key_table_grads
 *   (q_i.k_j) w          methods 1, 2       scalar_weight_term    scalar_weight_grads
 *   sum_t q_it k_jt a_rt method3            three_way_term        three_way_grads
 * and q_i.k_j (every mode but method3) is the core's GEMM in attention.c. */
#pragma once

#include "layers/attention_plan.h"

/* Before the (b,h) loop: the w2 (methods 1, 2) or at (method3) copy of the table. */
void relpos_prepare(const AttnPlan *p, const float *table);

/* The relative terms of one (b,h) into scores [L, L]:
 *   shaw, method4: writes q_i.a_r (+ k_j.a_r) only; the caller adds q_i.k_j after;
 *   methods 1, 2: scores = raw (.) w, raw = q_i.k_j;   method3: writes the whole score. */
void relpos_scores(const AttnPlan *p, const AttnWork *w, float *scores, const float *raw,
                   const float *qkv, const float *table, int b, int h);

/* Backward for one (b,h) in two steps. dscore [L, L] holds dL/d(unscaled scores) = dR.
 * relpos_backward_pre, before the caller writes dQ = dR.K and dK = dR^T.Q (methods 1, 2
 *   only): part[u] += dR (.) raw, then dR (.)= w (now dL/d(q.k)).
 * relpos_backward, after: shaw / method4 add their dQ, dK terms into d_qkv; method3 writes
 *   this (b,h)'s dQ and dK. Table gradients go into the slot partial `part`. */
void relpos_backward_pre(const AttnPlan *p, float *dscore, float *part, const float *raw);
void relpos_backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part,
                     float *d_qkv, const float *qkv, const float *table, int b, int h);

/* After the (b,h) loop: d_table += the slot partials, summed in a fixed order. */
void relpos_finish(const AttnPlan *p, float *d_table);
