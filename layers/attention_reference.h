/* The attention op of attention.h written straight from its formulas, in double precision and
 * one element at a time: every score S_ij is computed by its mode's formula with a per-element
 * clip, and every gradient by the chain rule on that formula. No GEMMs, no blocks, no band
 * splits, no scratch. It is the oracle the tests hold the fast path (attention.c and the scheme files)
 * against, and is itself checked against finite differences; nothing in the product calls it.
 * Arguments as attention_forward / attention_backward, in double, without scratch and raw_scores
 * (the reference recomputes q.k). Same conventions: d_qkv overwritten, d_table accumulated (+=),
 * d_carried in/out; dropout keeps element e of probs iff hash_uniform(dropout_key, e) >= p. */
#pragma once
#include <stdint.h>

#include "layers/attention.h"

/* S_ij / scale for the mode of s: q = q_i [d], key = k_j [d] (head_dim d = H / num_heads);
 * without the bias of t5 and alibi (rope: q_i and k_j rotated by i and j). */
double attention_reference_score(const AttnShape *s, const double *table, const double *q,
                                 const double *key, int i, int j);
/* The bias that t5 and alibi add to scale * S_ij / scale of head h (0 for the other modes):
 * t5 table[bucket(j-i), h], alibi -m_h |i-j|. */
double attention_reference_bias(const AttnShape *s, const double *table, int h, int i, int j);

void attention_reference_forward(double *ctx, double *probs, double *carried, const double *qkv,
                                 const double *table, const int *mask, const AttnShape *s,
                                 uint64_t dropout_key);

void attention_reference_backward(double *d_qkv, double *d_table, double *d_carried,
                                  const double *d_ctx, const double *qkv, const double *table,
                                  const double *probs, const AttnShape *s, uint64_t dropout_key);
