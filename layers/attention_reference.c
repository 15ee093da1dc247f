/* Reference attention (attention_reference.h): the formulas of attention.h, element by element,
 * in double. Per (b,h), with q_i, k_j, v_j the head's rows, d = H / heads, scale = 1/sqrt(d),
 * r = clip(i-j, -k, k) + k, s = |clip(i-j, -k, k)|:
 *   forward   S_ij by the mode's formula (t5, alibi: + their bias; rope: q_i, k_j rotated by i
 *             and j, each pair's own rotation);  C = [C +] S (residual);  logits = c C or S, + M;
 *             P = softmax_j(logits);  Pd = dropout(P);  ctx_i = sum_j Pd_ij v_j
 *   backward  dPd_ij = g_i.v_j;  dv_j = sum_i Pd_ij g_i;  dP = dropout'(dPd);
 *             dlogit_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij');  dC = d_carried + c dlogit
 *             (residual, stored back) or dS = dlogit;  dR = scale dS, then score_grads. */
#include "layers/attention_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "layers/positions.h"

#define REF_MASK_PENALTY (-10000.0)

typedef struct {
    int L, H, heads, d, ld, rel_k;
    double scale;
} RefShape;

static RefShape ref_shape(const AttnShape *s) {
    const int d = s->H / s->num_heads;
    return (RefShape){s->L, s->H, s->num_heads, d, 3 * s->H, rel_kind_uses_k(s->rel) ? s->rel_k : 0,
                      1.0 / sqrt((double)d)};
}

static int clip_offset(int i, int j, int rel_k) {
    const int delta = i - j;
    return delta < -rel_k ? -rel_k : (delta > rel_k ? rel_k : delta);
}

static double dot(const double *x, const double *y, int d) {
    double acc = 0.0;
    for (int t = 0; t < d; t++)
        acc += x[t] * y[t];
    return acc;
}

/* RoPE of x [d] by position pos (pos < 0: the inverse rotation R_{|pos|}^T = R_{pos}), half split:
 * out_t = x_t cos - x_{t+d/2} sin, out_{t+d/2} = x_{t+d/2} cos + x_t sin, angle pos theta^(-2t/d). */
static void rope(double *out, const double *x, int pos, int d, double theta) {
    for (int t = 0; t < d / 2; t++) {
        const double angle = pos * pow(theta, -2.0 * t / d), c = cos(angle), s = sin(angle);
        out[t] = x[t] * c - x[t + d / 2] * s;
        out[t + d / 2] = x[t + d / 2] * c + x[t] * s;
    }
}

double attention_reference_bias(const AttnShape *s, const double *table, int h, int i, int j) {
    if (s->rel == REL_T5)
        return table[(size_t)t5_bucket(j - i, s->t5_num_buckets, s->t5_max_distance) * s->num_heads + h];
    if (s->rel == REL_ALIBI)
        return -alibi_slope(h, s->num_heads) * abs(i - j);
    return 0.0;
}

double attention_reference_score(const AttnShape *s, const double *table, const double *q,
                                 const double *key, int i, int j) {
    const int d = s->H / s->num_heads, uses_k = rel_kind_uses_k(s->rel);
    const int rel_k = uses_k ? s->rel_k : 0, clipped = uses_k ? clip_offset(i, j, rel_k) : 0;
    const double *a = uses_k ? table + (size_t)(clipped + rel_k) * d : NULL; /* a_r */
    switch (s->rel) {
    case REL_NONE:
    case REL_T5:    /* + the bias, attention_reference_bias */
    case REL_ALIBI: return dot(q, key, d);                                  /* q.k */
    case REL_ROPE: {                                                         /* R_i q . R_j k */
        double rq[d], rk[d];
        rope(rq, q, i, d, s->rope_theta);
        rope(rk, key, j, d, s->rope_theta);
        return dot(rq, rk, d);
    }
    case REL_SHAW: return dot(q, key, d) + dot(q, a, d);                    /* q.k + q.a_r */
    case REL_METHOD1: return dot(q, key, d) * table[abs(clipped)];          /* (q.k) w_s */
    case REL_METHOD2: return dot(q, key, d) * table[clipped + rel_k];       /* (q.k) w_r */
    case REL_METHOD3: {                                                      /* sum q k a_r */
        double acc = 0.0;
        for (int t = 0; t < d; t++)
            acc += q[t] * key[t] * a[t];
        return acc;
    }
    case REL_METHOD4: return dot(q, key, d) + dot(q, a, d) + dot(key, a, d); /* + k.a_r */
    }
    return NAN;
}

/* The gradient of S_ij / scale, given dR = its upstream gradient: dq += dR dS/dq,
 * dkey += dR dS/dk, d_table += dR dS/dtable. */
static void score_grads(const AttnShape *s, double *dq, double *dkey, double *d_table,
                        const double *table, const double *q, const double *key, int i, int j,
                        double dR) {
    const int d = s->H / s->num_heads, uses_k = rel_kind_uses_k(s->rel);
    const int rel_k = uses_k ? s->rel_k : 0, clipped = uses_k ? clip_offset(i, j, rel_k) : 0;
    const int r = clipped + rel_k;
    const double *a = uses_k ? table + (size_t)r * d : NULL; /* a_r and its gradient */
    double *da = uses_k ? d_table + (size_t)r * d : NULL;
    switch (s->rel) {
    case REL_ROPE: { /* S = (R_i q).(R_j k): dq = R_i^T R_j k dR, dk = R_j^T R_i q dR */
        double rq[d], rk[d], gq[d], gk[d];
        rope(rq, q, i, d, s->rope_theta);
        rope(rk, key, j, d, s->rope_theta);
        rope(gq, rk, -i, d, s->rope_theta);
        rope(gk, rq, -j, d, s->rope_theta);
        for (int t = 0; t < d; t++) {
            dq[t] += dR * gq[t];
            dkey[t] += dR * gk[t];
        }
        break;
    }
    case REL_NONE:
    case REL_T5: /* the bias's gradient: attention_reference_backward */
    case REL_ALIBI:
    case REL_SHAW:
    case REL_METHOD4:
        for (int t = 0; t < d; t++) {
            dq[t] += dR * key[t];                         /* q.k */
            dkey[t] += dR * q[t];
            if (!uses_k)
                continue;
            dq[t] += dR * a[t];                           /* q.a_r */
            da[t] += dR * q[t];
            if (s->rel == REL_METHOD4) {
                dkey[t] += dR * a[t];                     /* k.a_r */
                da[t] += dR * key[t];
            }
        }
        break;
    case REL_METHOD1:
    case REL_METHOD2: {
        const int index = s->rel == REL_METHOD1 ? abs(clipped) : r;
        const double w = table[index];
        for (int t = 0; t < d; t++) {
            dq[t] += dR * w * key[t];
            dkey[t] += dR * w * q[t];
        }
        d_table[index] += dR * dot(q, key, d);
        break;
    }
    case REL_METHOD3:
        for (int t = 0; t < d; t++) {
            dq[t] += dR * a[t] * key[t];
            dkey[t] += dR * a[t] * q[t];
            da[t] += dR * q[t] * key[t];
        }
        break;
    }
}

/* Dropout's factor for element e: 1/(1-p) if kept, else 0. */
static double keep_factor(const AttnShape *s, uint64_t dropout_key, size_t e) {
    return hash_uniform(dropout_key, (uint32_t)e) >= s->dropout ? 1.0 / (1.0 - s->dropout) : 0.0;
}

void attention_reference_forward(double *ctx, double *probs, double *carried, const double *qkv,
                                 const double *table, const int *mask, const AttnShape *s,
                                 uint64_t dropout_key) {
    const RefShape r = ref_shape(s);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < r.heads; h++)
            for (int i = 0; i < r.L; i++) {
                const size_t row = (((size_t)b * r.heads + h) * r.L + i) * r.L;
                const double *q = qkv + (size_t)(b * r.L + i) * r.ld + h * r.d;
                double *P = probs + row, max = -INFINITY, sum = 0.0;
                for (int j = 0; j < r.L; j++) {
                    const double *key = qkv + (size_t)(b * r.L + j) * r.ld + r.H + h * r.d;
                    double logit = r.scale * attention_reference_score(s, table, q, key, i, j) +
                                   attention_reference_bias(s, table, h, i, j);
                    if (s->residual) {
                        carried[row + j] = (s->first_layer ? 0.0 : carried[row + j]) + logit;
                        logit = s->carried_scale * carried[row + j];
                    }
                    P[j] = logit + (mask[b * r.L + j] ? 0.0 : REF_MASK_PENALTY);
                    max = fmax(max, P[j]);
                }
                for (int j = 0; j < r.L; j++)
                    sum += P[j] = exp(P[j] - max);
                for (int j = 0; j < r.L; j++)
                    P[j] /= sum;
                for (int t = 0; t < r.d; t++) {
                    double out = 0.0;
                    for (int j = 0; j < r.L; j++) {
                        const double v = qkv[(size_t)(b * r.L + j) * r.ld + 2 * r.H + h * r.d + t];
                        out += P[j] * keep_factor(s, dropout_key, row + j) * v;
                    }
                    ctx[(size_t)(b * r.L + i) * r.H + h * r.d + t] = out;
                }
            }
}

void attention_reference_backward(double *d_qkv, double *d_table, double *d_carried,
                                  const double *d_ctx, const double *qkv, const double *table,
                                  const double *probs, const AttnShape *s, uint64_t dropout_key) {
    const RefShape r = ref_shape(s);
    memset(d_qkv, 0, (size_t)s->B * r.L * r.ld * sizeof *d_qkv);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < r.heads; h++)
            for (int i = 0; i < r.L; i++) {
                const size_t row = (((size_t)b * r.heads + h) * r.L + i) * r.L;
                const size_t qi = (size_t)(b * r.L + i) * r.ld + h * r.d;
                const double *g = d_ctx + (size_t)(b * r.L + i) * r.H + h * r.d, *P = probs + row;
                /* dP_ij = keep_ij dPd_ij / (1-p), dPd_ij = g_i.v_j; its P-weighted row sum */
                double row_dot = 0.0;
                for (int j = 0; j < r.L; j++) {
                    const double *v = qkv + (size_t)(b * r.L + j) * r.ld + 2 * r.H + h * r.d;
                    row_dot += P[j] * keep_factor(s, dropout_key, row + j) * dot(g, v, r.d);
                }
                for (int j = 0; j < r.L; j++) {
                    const size_t kj = (size_t)(b * r.L + j) * r.ld + r.H + h * r.d;
                    const double keep = keep_factor(s, dropout_key, row + j);
                    const double dP = keep * dot(g, qkv + kj + r.H, r.d);
                    for (int t = 0; t < r.d; t++) /* dv_j += Pd_ij g_i */
                        d_qkv[kj + r.H + t] += P[j] * keep * g[t];
                    double dS = P[j] * (dP - row_dot); /* dlogit */
                    if (s->residual) {
                        d_carried[row + j] += s->carried_scale * dS;
                        dS = d_carried[row + j];
                    }
                    if (s->rel == REL_T5) /* d b[bucket(j-i), h] += dS_ij */
                        d_table[(size_t)t5_bucket(j - i, s->t5_num_buckets, s->t5_max_distance) *
                                    r.heads + h] += dS;
                    score_grads(s, d_qkv + qi, d_qkv + kj, d_table, table, qkv + qi, qkv + kj, i,
                                j, r.scale * dS);
                }
            }
}
