/* Encoder layer: attention block and feed-forward block with residuals, Post-LN or Pre-LN.
 * Composition only; every product and nonlinearity is a primitive from layers.h. */

#include "layers/encoder.h"

#include "core/common.h"
#include "layers/layers.h"

const char *const norm_kind_names[] = {"post", "pre", NULL};

/* y = a + b (n floats); y may alias a */
static void add_vectors(float *y, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t e = 0; e < n; e++)
        y[e] = a[e] + b[e];
}

/* The attention call's shape: sh->attn, with the layer's bf16 Q|K|V (a->qkv16) in a bf16 context. */
static AttnShape attn_call(const LayerActs *a, const LayerShape *sh) {
    AttnShape shape = sh->attn;
    shape.qkv16 = a->qkv16;
    shape.ctx16 = a->ctx16;
    return shape;
}

/* Attention block: proj [N,H] = W_o . attention(W_qkv . in) (before b_o, which the residual sum
 * adds, and dropout). In a bf16 context Q|K|V exist in bf16 only (a->qkv16), the projection's fp32
 * output going through the backward's scratch s->d_qkv. */
static void attention_block_forward(LayerActs *a, LayerScratch *s, const float *in,
                                    const LayerParams *p, const int *mask, const LayerShape *sh,
                                    uint64_t key) {
    int N = sh->N, H = sh->H;
    if (a->qkv16)
        linear_forward_to_bf16(sh->gemm, s->d_qkv, a->qkv16, in, p->qkv_w, p->qkv_b, N, H, 3 * H);
    else
        linear_forward(sh->gemm, a->qkv, in, p->qkv_w, p->qkv_b, N, H, 3 * H);
    const AttnShape shape = attn_call(a, sh);
    attention_forward(a->ctx, a->probs, a->raw_scores, s->carried, s->attn,
                      a->qkv, p->position_table, mask, &shape, key);
    if (a->ctx16)
        linear_forward_bf16(sh->gemm, s->proj, a->ctx16, p->attn_out_w, NULL, N, H, H);
    else
        linear_forward(sh->gemm, s->proj, a->ctx, p->attn_out_w, NULL, N, H, H);
}

/* d_in [N,H] from d_proj [N,H] (the gradient of proj; b_o's gradient is the caller's, fused
 * into the pass that produced d_proj): overwritten, or added to what d_in holds if
 * add_to_d_in (Post-LN: the residual's gradient is there already). qkv_b's gradient is summed
 * by attention_backward where it writes d_qkv, so the linear's backward has no bias pass. */
static void attention_block_backward(float *d_in, int add_to_d_in, const float *d_proj,
                                     LayerParams *g, LayerScratch *s, const float *in,
                                     const LayerActs *a, const LayerParams *p, const LayerShape *sh,
                                     uint64_t key) {
    int N = sh->N, H = sh->H;
    if (a->ctx16)
        linear_backward_bf16(sh->gemm, s->d_ctx, g->attn_out_w, NULL, d_proj, a->ctx16, p->attn_out_w, N, H, H);
    else
        linear_backward(sh->gemm, s->d_ctx, g->attn_out_w, NULL, d_proj, a->ctx, p->attn_out_w, N, H, H);
    const AttnShape shape = attn_call(a, sh);
    attention_backward(s->d_qkv, g->qkv_b, g->position_table, s->d_carried, s->attn, s->d_ctx, a->qkv,
                       p->position_table, a->probs, a->raw_scores, &shape, key);
    (add_to_d_in ? linear_backward_accumulate : linear_backward)(sh->gemm, d_in, g->qkv_w, NULL, s->d_qkv, in,
                                                                p->qkv_w, N, H, 3 * H);
}

/* Feed-forward block: proj [N,H] = W2 gelu(W1 in + b1) + b2 (before dropout); b2 NULL when the
 * residual sum adds it. GELU's slope is kept for the backward unless forward_only. In a bf16
 * context GELU's output and slope exist in bf16 only (a->ffn_act16, which W2's products read, and
 * a->ffn_slope16), and W1's fp32 output goes through the backward's scratch s->d_ffn. */
static void ffn_block_forward(LayerActs *a, LayerScratch *s, const float *in, const LayerParams *p,
                              const float *b2, const LayerShape *sh) {
    int N = sh->N, H = sh->H, I = sh->ffn_dim;
    if (a->ffn_act16) {
        linear_gelu_forward_bf16(sh->gemm, s->d_ffn, sh->forward_only ? NULL : a->ffn_slope16, a->ffn_act16, in,
                                 p->ffn_in_w, p->ffn_in_b, N, H, I);
        linear_forward_bf16(sh->gemm, s->proj, a->ffn_act16, p->ffn_out_w, b2, N, I, H);
        return;
    }
    linear_gelu_forward(sh->gemm, sh->forward_only ? NULL : a->ffn_slope, a->ffn_act, in, p->ffn_in_w,
                        p->ffn_in_b, N, H, I);
    linear_forward(sh->gemm, s->proj, a->ffn_act, p->ffn_out_w, b2, N, I, H);
}

/* d_in [N,H] from d_proj [N,H], as attention_block_backward (b2's gradient is the caller's). In a
 * bf16 context GELU's input gradient exists in bf16 only (s->d_ffn16), which W1's products read. */
static void ffn_block_backward(float *d_in, int add_to_d_in, const float *d_proj, LayerParams *g,
                               LayerScratch *s, const float *in, const LayerActs *a,
                               const LayerParams *p, const LayerShape *sh) {
    int N = sh->N, H = sh->H, I = sh->ffn_dim;
    if (a->ffn_act16) {
        linear_backward_bf16(sh->gemm, s->d_ffn, g->ffn_out_w, NULL, d_proj, a->ffn_act16, p->ffn_out_w, N, I, H);
        gelu_bias_backward_bf16(s->d_ffn16, g->ffn_in_b, s->d_ffn, a->ffn_slope16, N, I);
        linear_backward_from_bf16(sh->gemm, d_in, add_to_d_in, g->ffn_in_w, s->d_ffn16, in, p->ffn_in_w, N, H, I);
        return;
    }
    linear_backward(sh->gemm, s->d_ffn, g->ffn_out_w, NULL, d_proj, a->ffn_act, p->ffn_out_w, N, I, H);
    gelu_bias_backward(s->d_ffn, g->ffn_in_b, s->d_ffn, a->ffn_slope, N, I);
    (add_to_d_in ? linear_backward_accumulate : linear_backward)(sh->gemm, d_in, g->ffn_in_w, NULL, s->d_ffn,
                                                                in, p->ffn_in_w, N, H, I);
}

const float *encoder_layer_forward(LayerActs *a, LayerScratch *s, const float *x,
                                   const LayerParams *p, const int *mask, const LayerShape *sh,
                                   LayerKeys keys) {
    size_t NH = (size_t)sh->N * sh->H;
    float p_drop = sh->hidden_dropout;
    if (!sh->pre_norm) { /* sum = x + drop(branch + bias) and its layer norm: one fused op each */
        attention_block_forward(a, s, x, p, mask, sh, keys.attn_probs);
        residual_layernorm_forward_keyed(a->norm1, a->sum1, a->norm1_mean, a->norm1_rstd, x, s->proj,
                                   p->attn_out_b, p->norm1_g, p->norm1_b, sh->N, sh->H, sh->eps,
                                   p_drop, keys.attn_out, sh->row_keys);
        ffn_block_forward(a, s, a->norm1, p, NULL, sh);
        residual_layernorm_forward_keyed(a->norm2, a->sum2, a->norm2_mean, a->norm2_rstd, a->norm1,
                                   s->proj, p->ffn_out_b, p->norm2_g, p->norm2_b, sh->N, sh->H,
                                   sh->eps, p_drop, keys.ffn_out, sh->row_keys);
        return a->norm2;
    }
    layernorm_forward(a->norm1, a->norm1_mean, a->norm1_rstd, x, p->norm1_g, p->norm1_b, sh->N,
                      sh->H, sh->eps);
    attention_block_forward(a, s, a->norm1, p, mask, sh, keys.attn_probs);
    residual_layernorm_forward_keyed(a->norm2, a->sum1, a->norm2_mean, a->norm2_rstd, x, s->proj,
                               p->attn_out_b, p->norm2_g, p->norm2_b, sh->N, sh->H, sh->eps, p_drop,
                               keys.attn_out, sh->row_keys);
    ffn_block_forward(a, s, a->norm2, p, p->ffn_out_b, sh);
    dropout_rows(s->proj, s->proj, sh->N, sh->H, p_drop, keys.ffn_out, sh->row_keys);
    add_vectors(a->sum2, a->sum1, s->proj, NH);
    return a->sum2;
}

void encoder_layer_backward(float *d_x, float *d_out, LayerParams *g, LayerScratch *s,
                            const float *x, const LayerActs *a, const LayerParams *p,
                            const LayerShape *sh, LayerKeys keys) {
    RP_CHECK(!sh->forward_only, "encoder_layer_backward: the shape says forward_only (the forward "
             "kept no GELU slope)");
    int N = sh->N, H = sh->H;
    float p_drop = sh->hidden_dropout, *row_stats = s->proj; /* proj is free in the backward */
    if (!sh->pre_norm) {
        /* d_out -> d_sum2 (in place) -> += d_norm1 via ffn -> d_sum1 (into d_x) -> += via attention.
         * Each residual_layernorm_backward also gives the dropped branch's gradient s->d_b and
         * the bias gradient of the linear before that dropout. */
        residual_layernorm_backward_keyed(d_out, s->d_b, g->ffn_out_b, g->norm2_g, g->norm2_b, row_stats,
                                    d_out, NULL, a->sum2, p->norm2_g, a->norm2_mean, a->norm2_rstd,
                                    N, H, p_drop, keys.ffn_out, sh->row_keys);
        ffn_block_backward(d_out, 1, s->d_b, g, s, a->norm1, a, p, sh);
        residual_layernorm_backward_keyed(d_x, s->d_b, g->attn_out_b, g->norm1_g, g->norm1_b, row_stats,
                                    d_out, NULL, a->sum1, p->norm1_g, a->norm1_mean, a->norm1_rstd,
                                    N, H, p_drop, keys.attn_out, sh->row_keys);
        attention_block_backward(d_x, 1, s->d_b, g, s, x, a, p, sh, keys.attn_probs);
        return;
    }
    /* d_out = d_sum2 -> d_sum1 = d_sum2 + via LN2/ffn (in place) -> d_x = d_sum1 + via LN1/attention */
    float *d_norm = s->d_a;
    dropout_bias_backward_keyed(s->d_b, g->ffn_out_b, d_out, N, H, p_drop, keys.ffn_out, sh->row_keys);
    ffn_block_backward(d_norm, 0, s->d_b, g, s, a->norm2, a, p, sh);
    residual_layernorm_backward_keyed(d_out, s->d_b, g->attn_out_b, g->norm2_g, g->norm2_b, row_stats,
                                d_norm, d_out, a->sum1, p->norm2_g, a->norm2_mean, a->norm2_rstd, N,
                                H, p_drop, keys.attn_out, sh->row_keys);
    attention_block_backward(d_x, 0, s->d_b, g, s, a->norm1, a, p, sh, keys.attn_probs);
    residual_layernorm_backward_keyed(d_x, NULL, NULL, g->norm1_g, g->norm1_b, row_stats, d_x, d_out, x,
                                p->norm1_g, a->norm1_mean, a->norm1_rstd, N, H, 0.0f, 0, sh->row_keys);
}
