/* MLM head, evaluated only at the M labelled positions (rows of the [N, H] hidden states). */
#include <string.h>

#include "layers/encoder.h"
#include "layers/layers.h"

/* gathered[m] = hidden[rows[m]];  pre = gathered W_t^T + b_t;  act = gelu(pre) and
 * slope = gelu'(pre) (linear_gelu_forward, as the encoder's feed-forward input; no slope if
 * forward_only);  out = LN(act);  logits [M,V] = out E^T + bias */
void mlm_head_forward(Gemm *g, HeadActs *a, const float *hidden, const int *rows, int M,
                      const HeadParams *p, const float *word_emb, int H, int V, float eps,
                      int forward_only) {
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
        memcpy(a->gathered + (size_t)m * H, hidden + (size_t)rows[m] * H, sizeof(float) * H);
    linear_gelu_forward(g, forward_only ? NULL : a->slope, a->act, a->gathered, p->transform_w,
                        p->transform_b, M, H, H);
    layernorm_forward(a->out, a->mean, a->rstd, a->act, p->norm_g, p->norm_b, M, H, eps);
    linear_forward(g, a->logits, a->out, word_emb, p->bias, M, H, V);
}

/* d_out = d_logits E (and the output's parameter gradients, the bias's unless g->bias is NULL: a
 * caller that adds it while making d_logits, crossentropy_backward_bias; d_logits is consumed);  d_act = LN backward (from act, the
 * layer norm's input);  d_pre = d_act * slope with b_t's gradient in the same pass;  d_gathered,
 * d_W_t from the transform's linear_backward;  d_hidden[rows[m]] += d_gathered[m] (rows are
 * distinct, so the scatter is race-free). */
void mlm_head_backward(Gemm *gemm, float *d_hidden, HeadParams *g, float *d_word_emb, float *d_logits,
                       float *d_tmp, const HeadActs *a, const int *rows, int M,
                       const HeadParams *p, const float *word_emb, int H, int V) {
    float *d_out = d_tmp, *d_gathered = d_tmp + (size_t)M * H;
    linear_backward_consuming(gemm, d_out, d_word_emb, g->bias, d_logits, a->out, word_emb, M, H, V);
    layernorm_backward(d_out, g->norm_g, g->norm_b, d_out, a->act, p->norm_g, a->mean, a->rstd, M, H);
    gelu_bias_backward(d_out, g->transform_b, d_out, a->slope, M, H);
    linear_backward(gemm, d_gathered, g->transform_w, NULL, d_out, a->gathered, p->transform_w, M, H, H);
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *dst = d_hidden + (size_t)rows[m] * H;
        const float *src = d_gathered + (size_t)m * H;
        for (int c = 0; c < H; c++)
            dst[c] += src[c];
    }
}
