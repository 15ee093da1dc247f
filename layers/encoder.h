/* Composite layers built from the primitives: the encoder layer (Post-LN as BERT, or Pre-LN)
 * and the MLM head. Shapes: N = B*L tokens, H hidden, I intermediate, M labelled positions. */
#pragma once
#include <stdint.h>

#include "core/gemm.h"
#include "core/kinds.h" /* NormKind */
#include "layers/attention.h"

/* Unpadded batches (attn.seq_offsets): N = T real tokens, the attention per sequence
 * (attention.h), mask NULL; every other op is row-wise and runs on the T rows. */

/* One encoder layer's parameters; the same struct points into gradients and optimizer moments.
 * query/key/value are stored back to back so Q|K|V is one GEMM. */
typedef struct {
    float *qkv_w;                /* [3H, H] = query.weight ; key.weight ; value.weight */
    float *qkv_b;                /* [3H] */
    float *position_table;       /* the position scheme's table: the layer's own, or the model's one
                                  * (t5); NULL without one (positions.h) */
    float *attn_out_w, *attn_out_b; /* [H, H], [H] */
    float *norm1_g, *norm1_b;    /* attention/output/LayerNorm [H] */
    float *ffn_in_w, *ffn_in_b;  /* [I, H], [I] */
    float *ffn_out_w, *ffn_out_b; /* [H, I], [H] */
    float *norm2_g, *norm2_b;    /* output/LayerNorm [H] */
} LayerParams;

/* What one layer saves for backward.
 *   Post-LN: sum1 = x + drop(attn)      norm1 = LN1(sum1)    ffn on norm1
 *            sum2 = norm1 + drop(ffn)   norm2 = LN2(sum2) = output
 *   Pre-LN:  norm1 = LN1(x)             sum1 = x + drop(attn(norm1))
 *            norm2 = LN2(sum1)          sum2 = sum1 + drop(ffn(norm2)) = output */
typedef struct {
    float *norm1, *norm1_mean, *norm1_rstd;  /* [N,H], [N], [N] */
    float *qkv;                              /* [N, 3H]; NULL in a bf16 context (qkv16) */
    float *probs, *raw_scores;               /* [B, heads, L, L] (see attention.h); raw_scores
                                              * only for methods 1, 2 */
    float *ctx;                              /* [N, H]; NULL in a bf16 context (ctx16) */
    float *sum1;                             /* [N, H] */
    float *norm2, *norm2_mean, *norm2_rstd;  /* [N,H], [N], [N] */
    float *ffn_slope;                        /* [N, I]: gelu'(W1 h + b1) in fp32; NULL in bf16 */
    float *ffn_act;                          /* [N, I] gelu(W1 h + b1) in fp32; NULL in bf16 */
    float *sum2;                             /* [N, H] */
    bf16 *ffn_act16;                         /* [N, I] gelu(W1 h + b1) in a bf16 context, in bf16
                                              * only (it feeds only W2's products); else NULL */
    bf16 *ffn_slope16;                       /* [N, I] gelu'(W1 h + b1) in a bf16 context; else NULL */
    bf16 *qkv16;                             /* [N, 3H] Q|K|V in a bf16 context, in bf16 only (written
                                              * once by the projection, read by attention's products);
                                              * else NULL */
    bf16 *ctx16;                             /* [N, H] ctx in a bf16 context, in bf16 only (written by
                                              * attention, read by the output projection's products);
                                              * else NULL */
} LayerActs;

/* Scratch shared by all layers (contents do not survive a call). */
typedef struct {
    float *proj;        /* [N, H] projection outputs before dropout/residual; in the backward,
                         * the layer norms' row statistics [2N] */
    float *d_a, *d_b;   /* [N, H] gradient temporaries (d_a: Pre-LN only) */
    float *d_ffn;       /* [N, I] */
    float *d_qkv;       /* [N, 3H] */
    float *d_ctx;       /* [N, H] */
    float *attn;        /* attention_scratch_floats() */
    float *carried;     /* [B, heads, L, L] residual scores C (residual only) */
    float *d_carried;   /* [B, heads, L, L] dL/dC carried down (residual only) */
    bf16 *d_ffn16;      /* [N, I] in a bf16 context (else NULL): GELU's input gradient, written in
                         * bf16 only (it feeds only W1's products) */
} LayerScratch;

/* NormKind (core/kinds.h): where the layer norms sit, after each residual sum (post, BERT) or before
 * each branch (pre). Their config names in enum order ("post", "pre"), NULL-terminated. */
extern const char *const norm_kind_names[];

typedef struct {
    int N, H, ffn_dim; /* tokens, hidden, intermediate */
    int pre_norm;       /* 0 = Post-LN (BERT), 1 = Pre-LN */
    float eps;          /* LayerNorm epsilon */
    float hidden_dropout;
    AttnShape attn;     /* includes attention dropout, residual flags for this layer */
    const int *row_keys; /* [N] the hidden dropout's row numbering (layers.h, *_keyed): an unpadded
                          * batch's rows in the padded layout; NULL: row n is n */
    int forward_only;   /* 1: no backward follows (evaluation, prediction): the forward skips
                         * what only the backward needs (GELU's slope is left unset) */
    Gemm *gemm;         /* the linear layers' products (core/gemm.h; NULL: fp32); bf16 when
                         * the activations have ffn_act16 and d_ffn16 */
} LayerShape;

/* Dropout keys of one layer's three sites, derived from the step key. */
typedef struct {
    uint64_t attn_probs, attn_out, ffn_out;
} LayerKeys;

/* out [N,H] = layer(x [N,H]); out points at acts->norm2 (post) or acts->sum2 (pre). */
const float *encoder_layer_forward(LayerActs *acts, LayerScratch *scratch, const float *x,
                                   const LayerParams *p, const int *mask, const LayerShape *s,
                                   LayerKeys keys);
/* d_x [N,H] (overwrites) from d_out [N,H] (may be clobbered); grads += into g. */
void encoder_layer_backward(float *d_x, float *d_out, LayerParams *g, LayerScratch *scratch,
                            const float *x, const LayerActs *acts, const LayerParams *p,
                            const LayerShape *s, LayerKeys keys);

/* MLM head at the M labelled positions:
 *   t = LN(gelu(hidden[rows] W_t^T + b_t)),  logits [M, V] = t E^T + bias   (E = word embeddings) */
typedef struct {
    float *transform_w, *transform_b; /* [H, H], [H] */
    float *norm_g, *norm_b;           /* [H] */
    float *bias;                      /* [V] */
} HeadParams;

typedef struct {
    float *gathered;               /* [M, H] hidden rows at the labelled positions */
    float *slope;                  /* [M, H] gelu'(pre), pre = gathered W_t^T + b_t (not with
                                    * forward_only) */
    float *act, *out;              /* [M, H] gelu(pre), LN(act) */
    float *mean, *rstd;            /* [M] */
    float *logits;                 /* [M, V]; holds softmax probabilities after the loss */
} HeadActs;

/* forward_only = 1: no backward follows; acts->slope is left unset, every output is the same. */
void mlm_head_forward(Gemm *g, HeadActs *acts, const float *hidden, const int *rows, int M,
                      const HeadParams *p, const float *word_emb, int H, int V, float eps,
                      int forward_only);
/* d_logits [M,V] in (clobbered); d_hidden [N,H] += scattered row gradients (caller zeroes it);
 * grads += into g (g->bias NULL: the bias gradient is the caller's, crossentropy_backward_bias) and
 * d_word_emb. d_tmp: [2, M, H] scratch. */
void mlm_head_backward(Gemm *gemm, float *d_hidden, HeadParams *g, float *d_word_emb, float *d_logits,
                       float *d_tmp, const HeadActs *acts, const int *rows, int M,
                       const HeadParams *p, const float *word_emb, int H, int V);
