/* The layer library: one op per file, each a forward/backward pair.
 *
 * Conventions
 *   - Row-major; N = B*L tokens; shapes are given as [rows, cols].
 *   - Parameter gradients accumulate (+=); input gradients overwrite (=), except in the ops
 *     named *_accumulate, which add the input gradient to the one already there (a residual's).
 *   - No allocation inside a layer: scratch space, if any, is passed in.
 *   - Matrix products go through core/gemm.h: the layers that multiply by a weight take its
 *     context (Gemm *g: fp32 or bf16 mixed precision; NULL = fp32), the per-head attention
 *     products call gemm_f32. OpenMP parallelises the rest, and no two threads ever write the same
 *     gradient element.
 *   - Tensors are fp32, except where a signature says bf16: the *_bf16 variants below take or
 *     produce the one activation and the one gradient that exist in bf16 only in a bf16 context
 *     (the feed-forward's GELU output and its gradient, docs/bf16.md); they need a bf16 g.
 *   - Dropout masks are a pure function of (key, element index) (core/rng.h), so backward
 *     regenerates them instead of storing them. */
#pragma once
#include <omp.h>
#include <stddef.h>
#include <stdint.h>

#include "core/gemm.h"

/* ---- column sums ------------------------------------------------------------------------
 * The passes that sum an [N, cols] gradient over its rows (bias, gamma and beta gradients) split
 * the columns into blocks that threads own whole, each block summed over the rows in order: a
 * column's sum is then the same for any blocking, hence for any thread count. col_blocks gives
 * the fewest blocks that keep every thread busy (a row-strided pass over 64-column blocks ran at
 * a third of the speed of one over 1024-column rows), at most COL_BLOCK_MAX columns each (the
 * accumulators live on the stack) and whole cache lines wide. Call outside parallel regions. */
enum { COL_BLOCK_MAX = 1024 };
typedef struct {
    int count, width, cols; /* block b: columns [b * width, min(cols, (b + 1) * width)) */
} ColBlocks;

static inline ColBlocks col_blocks(int cols) {
    const int threads = omp_get_max_threads();
    int count = (cols + COL_BLOCK_MAX - 1) / COL_BLOCK_MAX;
    count = (count + threads - 1) / threads * threads;
    int width = ((cols + count - 1) / count + 15) / 16 * 16;
    width = width < 16 ? 16 : width;
    return (ColBlocks){(cols + width - 1) / width, width, cols};
}

/* Columns in block b (from b * width): width, fewer in the last block. */
static inline int col_block_width(ColBlocks blocks, int block) {
    const int left = blocks.cols - block * blocks.width;
    return left < blocks.width ? left : blocks.width;
}

/* ---- embedding.c ------------------------------------------------------------------------
 * out[n,:] = word[ids[n],:] + type[types[n],:] + (pos ? pos[n % L,:] : 0)     n < B*L
 * word [V,H], type [T,H], pos [P,H] (P >= L) or NULL. */
void embedding_forward(float *out, const int *ids, const int *types, const float *word,
                       const float *type, const float *pos, int B, int L, int H);
/* d_word[ids[n]] += d_out[n];  d_type[types[n]] += d_out[n];  d_pos[n % L] += d_out[n]
 * (d_pos may be NULL). Race-free: threads own disjoint column ranges. */
void embedding_backward(float *d_word, float *d_type, float *d_pos, const float *d_out,
                        const int *ids, const int *types, int B, int L, int H);
/* The same with row n at position positions[n] (an unpadded batch's rows; NULL: n % L). */
void embedding_forward_at(float *out, const int *ids, const int *types, const float *word,
                          const float *type, const float *pos, int N, int L, const int *positions,
                          int H);
void embedding_backward_at(float *d_word, float *d_type, float *d_pos, const float *d_out,
                           const int *ids, const int *types, int N, int L, const int *positions,
                           int H);

/* ---- layernorm.c ------------------------------------------------------------------------
 * out[n,c] = (in[n,c] - mean[n]) * rstd[n] * gamma[c] + beta[c]     in, out [N,C]
 * Saves mean[N] and rstd[N] = 1/sqrt(var + eps) (biased variance) for backward. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *gamma,
                       const float *beta, int N, int C, float eps);
/* The residual sum before a layer norm, fused: sum [N,C] = res + dropout(branch + branch_bias)
 * (the mask of dropout_forward(.., p, key) on [N,C]; branch_bias [C], the bias of the linear that
 * produced branch), out = LN(sum) with mean, rstd as layernorm_forward. */
void residual_layernorm_forward(float *out, float *sum, float *mean, float *rstd, const float *res,
                                const float *branch, const float *branch_bias, const float *gamma,
                                const float *beta, int N, int C, float eps, float p, uint64_t key);
/* d_in (overwrites);  d_gamma += sum_n d_out * xhat;  d_beta += sum_n d_out.
 * d_in may alias d_out. */
void layernorm_backward(float *d_in, float *d_gamma, float *d_beta, const float *d_out,
                        const float *in, const float *gamma, const float *mean, const float *rstd,
                        int N, int C);
/* The backward of a residual sum and its layer norm, fused (as residual_layernorm_forward:
 * in = sum = res + dropout(branch), LN(sum) with mean, rstd):
 *   d_sum [N,C] = d_res + layernorm_backward(d_out)    (d_res NULL: no residual term)
 *   d_gamma, d_beta += as layernorm_backward
 *   d_branch [N,C] = dropout_backward(d_sum, p, key);  d_bias [C] += sum_n d_branch
 *   (d_branch and d_bias NULL: neither)
 * d_sum may alias d_out or d_res. row_stats: [2N] scratch. One pass over the rows for their
 * statistics, one over column blocks for everything else, instead of passes for the layer norm's
 * parameter gradients, d_sum, the residual add, the dropout, and the bias gradient. */
void residual_layernorm_backward(float *d_sum, float *d_branch, float *d_bias, float *d_gamma,
                                 float *d_beta, float *row_stats, const float *d_out,
                                 const float *d_res, const float *in, const float *gamma,
                                 const float *mean, const float *rstd, int N, int C, float p,
                                 uint64_t key);

/* The same two keyed by row: the dropout mask index of element (n, c) is row_keys[n]*C + c
 * (NULL: n*C + c, the functions above). An unpadded batch passes each row's row in the padded
 * layout, so that both layouts draw the same mask for a (sequence, position). */
void residual_layernorm_forward_keyed(float *out, float *sum, float *mean, float *rstd, const float *res,
                                      const float *branch, const float *branch_bias, const float *gamma,
                                      const float *beta, int N, int C, float eps, float p, uint64_t key,
                                      const int *row_keys);
void residual_layernorm_backward_keyed(float *d_sum, float *d_branch, float *d_bias, float *d_gamma,
                                       float *d_beta, float *row_stats, const float *d_out,
                                       const float *d_res, const float *in, const float *gamma,
                                       const float *mean, const float *rstd, int N, int C, float p,
                                       uint64_t key, const int *row_keys);
/* The keyed backward with its column pass on one instruction set, for the tests (avx512 0: the
 * portable loops; 1: AVX-512, where cpu_has_avx512_loops()): the same bits either way. */
void residual_layernorm_backward_isa(int avx512, float *d_sum, float *d_branch, float *d_bias, float *d_gamma,
                                     float *d_beta, float *row_stats, const float *d_out, const float *d_res,
                                     const float *in, const float *gamma, const float *mean, const float *rstd, int N,
                                     int C, float p, uint64_t key, const int *row_keys);

/* ---- linear.c ---------------------------------------------------------------------------
 * out[N,o] = in[N,i] . W[o,i]^T + b[o]      (b may be NULL)
 * In bf16 (g's precision) every product has bf16 operands and fp32 accumulation and outputs;
 * the backward converts d_out once for both of its products (gemm_stage). */
void linear_forward(Gemm *g, float *out, const float *in, const float *W, const float *b, int N, int i, int o);
/* d_in = d_out . W (overwrites; skipped if d_in is NULL);  dW += d_out^T . in;  db += sum_n d_out */
void linear_backward(Gemm *g, float *d_in, float *dW, float *db, const float *d_out, const float *in,
                     const float *W, int N, int i, int o);
/* The same with d_in += d_out . W: the GEMM adds the input gradient to what d_in holds (the
 * residual path's gradient) instead of a separate pass adding the two. */
void linear_backward_accumulate(Gemm *g, float *d_in, float *dW, float *db, const float *d_out,
                                const float *in, const float *W, int N, int i, int o);
/* As linear_backward, for a d_out read by nothing else: consumed (bf16 g: overwritten by its bf16
 * form, gemm_convert_in_place, so the largest gradient of a step needs no second copy). */
void linear_backward_consuming(Gemm *g, float *d_in, float *dW, float *db, float *d_out, const float *in,
                               const float *W, int N, int i, int o);
/* bf16 input in16 [N,i] (bf16 g): out = in16 . W^T + b, and its backward (d_in overwritten, d_out fp32). */
void linear_forward_bf16(Gemm *g, float *out, const bf16 *in16, const float *W, const float *b, int N, int i,
                         int o);
void linear_backward_bf16(Gemm *g, float *d_in, float *dW, float *db, const float *d_out, const bf16 *in16,
                          const float *W, int N, int i, int o);
/* bf16 output (bf16 g: the output feeds only bf16 products): out16 [N,o] = bf16(in . W^T + b), the GEMM
 * writing in . W^T into the fp32 scratch pre [N,o], bias and rounding in one pass after it. */
void linear_forward_to_bf16(Gemm *g, float *pre, bf16 *out16, const float *in, const float *W, const float *b, int N,
                            int i, int o);
/* bf16 gradient d_out16 [N,o] (bf16 g): d_in = d_out16 . W (+= with accumulate);  dW += d_out16^T . in.
 * No bias gradient: its fp32 sum is the producer's (gelu_bias_backward_bf16). */
void linear_backward_from_bf16(Gemm *g, float *d_in, int accumulate, float *dW, const bf16 *d_out16,
                               const float *in, const float *W, int N, int i, int o);

/* ---- gelu.c -----------------------------------------------------------------------------
 * out = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))  (exact form, as BERT)      [n]
 * Phi and phi from one inline exp (layers/gelu_kernels.h: within 1.2e-7 of the double CDF), 16
 * lanes where the CPU has AVX-512 (gelu_avx512.c), the same bits on any CPU and thread count. */
void gelu_forward(float *out, const float *in, size_t n);
/* d_in = d_out * (Phi(x) + x phi(x)); d_in may alias d_out. */
void gelu_backward(float *d_in, const float *d_out, const float *in, size_t n);

/* The feed-forward input, linear + GELU fused (gelu.c), keeping GELU's slope for backward
 * instead of its input: pre = in [N,i] . W [o,i]^T + b;  act [N,o] = gelu(pre);
 * slope [N,o] = gelu'(pre) = Phi(pre) + pre phi(pre)   (one GEMM, one pass).
 * slope NULL: forward only (no backward follows), act alone, with the same bits. */
void linear_gelu_forward(Gemm *g, float *slope, float *act, const float *in, const float *W, const float *b,
                         int N, int i, int o);
/* The same with act and slope in bf16 only (bf16 g: they feed only the next products and GELU's
 * backward): act16 = bf16(gelu(pre)), slope16 = bf16(gelu'(pre)); the GEMM writes pre into the fp32
 * scratch pre [N,o]. slope16 NULL: forward only, act16 alone, with the same bits. */
void linear_gelu_forward_bf16(Gemm *g, float *pre, bf16 *slope16, bf16 *act16, const float *in, const float *W,
                              const float *b, int N, int i, int o);
/* d_pre [N,o] = d_act * slope (may alias d_act);  db [o] += sum_n d_pre   (one pass, no erf or
 * exp; the linear's d_in and dW then come from linear_backward with db = NULL). */
void gelu_bias_backward(float *d_pre, float *db, const float *d_act, const float *slope, int N, int o);
/* The same from slope16 (bf16) with d_pre written in bf16 only, d_pre16 [N,o] (it feeds only the
 * products of linear_backward_from_bf16); db is summed from the fp32 values d_act * slope16. */
void gelu_bias_backward_bf16(bf16 *d_pre16, float *db, const float *d_act, const bf16 *slope16, int N, int o);

/* ---- dropout.c --------------------------------------------------------------------------
 * out[e] = keep(e) ? in[e] / (1-p) : 0,  keep(e) = hash_uniform(key, e) >= p.   [n]
 * p == 0 copies (or is a no-op when out == in). out may alias in. */
void dropout_forward(float *out, const float *in, size_t n, float p, uint64_t key);
/* d_in[e] = keep(e) ? d_out[e] / (1-p) : 0.  d_in may alias d_out. */
void dropout_backward(float *d_in, const float *d_out, size_t n, float p, uint64_t key);
/* A dropout after a linear, backward, with that linear's bias gradient in the same pass:
 * d_in [N,C] = dropout_backward(d_out) (elements e = n*C + c);  db [C] += sum_n d_in.
 * d_in may alias d_out. */
void dropout_bias_backward(float *d_in, float *db, const float *d_out, int N, int C, float p,
                           uint64_t key);
/* Keyed by row as residual_layernorm_forward_keyed: dropout_bias_backward, and dropout_forward
 * (= dropout_backward) of [N, C] rows. */
void dropout_bias_backward_keyed(float *d_in, float *db, const float *d_out, int N, int C, float p,
                                 uint64_t key, const int *row_keys);
void dropout_rows(float *out, const float *in, int N, int C, float p, uint64_t key,
                  const int *row_keys);
/* The serial kernel of both, for callers inside their own parallel region: elements
 * first .. first+n-1 of a masked tensor, out[e] = keep(first+e) ? in[e] / (1-p) : 0. */
void dropout_span(float *out, const float *in, size_t n, float p, uint64_t key, size_t first);

/* ---- softmax.c --------------------------------------------------------------------------
 * One row's numerically stable softmax in two passes, for callers that fuse their own passes
 * around it (the loss, attention; their backward is fused into theirs): max_c in[c], and
 * out[c] = exp(in[c] - max) / sum given that max (out may alias in), returning
 * log sum_c exp(in[c]). A row of -inf gives zeros (and -inf); a NaN row gives NaN. */
float softmax_row_max(const float *in, int cols);
float softmax_row_normalize(float *out, const float *in, int cols, float max);
/* softmax_row_probs: that normalisation without the log and with exp_nonpositive for expf
 * (attention's rows), on AVX-512 where the CPU has it with the same bits (the _isa forms as below). */
void softmax_row_probs(float *out, const float *in, int cols, float max);
void softmax_row_probs_isa(int avx512, float *out, const float *in, int cols, float max);
/* rows [n, cols] = softmax_row_probs of each row in place given its max (max [n]), on AVX-512 4 rows at
 * a time (their passes interleaved) with the same bits. */
void softmax_rows_probs(float *rows, int n, int cols, const float *max);
void softmax_rows_probs_isa(int avx512, float *rows, int n, int cols, const float *max);
/* rows [n, cols] = softmax(scale rows) row by row in place, as attention's logits pass (t = scale x +
 * 0, its max) then softmax_row_probs: attention's rows without a bias, mask, carried scores or
 * dropout. On AVX-512 where the CPU has it (layers/softmax_avx512.c: 4 rows at a time, their
 * passes interleaved), with the same bits; the _isa forms pick (avx512 0: the portable loops; 1:
 * AVX-512, the CPU must have it), for the tests; the _row_ form is one row. */
void softmax_scaled_rows_probs(float *rows, int n, int cols, float scale);
void softmax_scaled_rows_probs_isa(int avx512, float *rows, int n, int cols, float scale);
void softmax_scaled_row_probs_isa(int avx512, float *row, int cols, float scale);
/* Its backward: g [n, cols] = scale p (g - sum_j g_j p_j) row by row in place (g: dL/dP in, dL/dx
 * out; p: P), on AVX-512 where the CPU has it with the same bits; the _isa forms as above. */
void softmax_scaled_rows_backward(float *g, const float *p, int n, int cols, float scale);
void softmax_scaled_rows_backward_isa(int avx512, float *g, const float *p, int n, int cols, float scale);
void softmax_scaled_row_backward_isa(int avx512, float *g, const float *p, int cols, float scale);
/* Residual attention's (RealFormer) backward rows without dropout: t = p (g - sum_j g_j p_j), the
 * carried scores' gradient dc += carried_scale t, then g = scale dc ([n, cols] each), on AVX-512
 * where the CPU has it with the same bits; the _isa form as above. */
void softmax_carried_rows_backward(float *g, const float *p, float *dc, int n, int cols, float scale,
                                   float carried_scale);
void softmax_carried_rows_backward_isa(int avx512, float *g, const float *p, float *dc, int n, int cols, float scale,
                                       float carried_scale);

/* e^x for x <= 0 (a logit minus its row's max) as 2^n e^r: n = round(x / ln 2) (by adding and
 * subtracting 1.5 * 2^23), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts, so r is exact to
 * ~2^-32), e^r by its Taylor polynomial of degree 7 (truncation under 6e-9 relative), 2^n put in the
 * exponent field. Plain arithmetic and integer masks, no branch or float compare (which GCC does
 * not if-convert under -ftrapping-math), so an `omp simd` loop keeps it in vector registers.
 * |x| above ln 2^-126 (where e^-|x| is subnormal or 0), -inf included, gives +0; NaN gives NaN.
 * Within a few ulp of expf (tests/layers/test_softmax.c). */
static inline float exp_nonpositive(float x) {
    const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) for |x| < 2^21 */
    const float r = (x - n * 0.693145751953125f) - n * 1.42860677e-6f;  /* ln 2 = hi + lo, hi of 16 bits */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const float m = n > -127.0f ? (n < 127.0f ? n : 127.0f) : -127.0f; /* NaN: -127, a defined conversion */
    union {
        uint32_t u;
        float f;
    } two_n = {(uint32_t)((int32_t)m + 127) << 23};
    union {
        float f;
        uint32_t u;
    } in = {x}, out = {p * two_n.f};
    const uint32_t magnitude = in.u & 0x7fffffffu; /* kept: |x| <= ln 2^-126 (0x42aeac50), or NaN */
    out.u &= 0u - (uint32_t)(magnitude <= 0x42aeac50u || magnitude > 0x7f800000u);
    return out.f;
}

/* The label of a position or sequence that no loss counts (PyTorch's ignore_index): MLM
 * positions that are not predicted, padding rows of a batch. */
#define IGNORE_LABEL (-100)

/* ---- crossentropy.c ---------------------------------------------------------------------
 * loss = -(1/M') sum_{m: labels[m] != IGNORE_LABEL} log softmax(logits[m])[labels[m]]
 * logits [M,V]; M' = number of rows with a label (0 -> loss 0).
 * Writes the softmax into probs [M,V] (may alias logits) for backward, and the number of rows
 * whose argmax equals the label into *n_correct (may be NULL). Returns the loss. */
float crossentropy_forward(float *probs, int *n_correct, const float *logits, const int *labels,
                           int M, int V);
/* d_logits = (probs - onehot(label)) * d_loss / M' (IGNORE_LABEL rows get 0); overwrites;
 * d_logits may alias probs. */
void crossentropy_backward(float *d_logits, const float *probs, const int *labels, int M, int V,
                           float d_loss);
/* The same and db [V] += the column sums of d_logits (the bias gradient of the linear map that made
 * the logits: the MLM decoder's) in one pass over d_logits, with the bits of the two passes. */
void crossentropy_backward_bias(float *d_logits, float *restrict db, const float *probs, const int *labels, int M,
                                int V, float d_loss);

/* ---- tanh.c -----------------------------------------------------------------------------
 * out = tanh(in)      [n]   (the BERT pooler's activation); out may alias in. */
void tanh_forward(float *out, const float *in, size_t n);
/* d_in = d_out * (1 - out^2), from the forward's output; d_in may alias d_out. */
void tanh_backward(float *d_in, const float *d_out, const float *out, size_t n);
