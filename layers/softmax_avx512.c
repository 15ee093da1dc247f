/* softmax_scaled_row_probs (layers/layers.h) on AVX-512: the same bits as the portable loops of
 * softmax.c, 16 elements a register and the row's last partial register masked (the portable
 * loops take 8 a register and finish a row of attention's tens of elements in scalar code, whose
 * calls of the exp were a third of the row's time).
 *
 * The portable loops' arithmetic, element for element: t = scale x + 0 (the logits pass of
 * attention.c), max over t (NaN skipped), e = exp_nonpositive(t - max) with its operations in
 * their order, each fused multiply-add where GCC contracts the C expression, out = e * (1 / sum).
 * The sum's order is that of the `omp simd` reduction there: 8 partial sums, sum j taking the
 * elements j, j+8, ... of the whole 8-element groups in order, sum 0 then the last cols % 8
 * elements one by one, then 0 + sum 0 + sum 1 + ... + sum 7 (tests/layers/test_softmax.c checks
 * the bits against the portable loops over lengths 1-130). Compiled for AVX-512F by function
 * attributes; called only where the CPU has it.
 * softmax_scaled_row_backward likewise: dot = sum_j g_j p_j as the portable loop's reduction (lane j
 * of 8 a fused multiply-add chain over j, j+8, ..., lane 0 then the last cols % 8, then 0 + lane 0 +
 * ... + lane 7), g = scale (p (g - dot)); softmax_carried_rows_backward's carry after it, dc = dc +
 * carried_scale t as one fused multiply-add (GCC contracts the portable loop's), g = scale dc.
 * softmax_row_probs (and its rows form) is the second half of the forward: given the logits and
 * their max, t = x instead of scale x + 0. */
#include "layers/softmax_avx512.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define AVX512 __attribute__((target("avx512f")))

/* Lanes 0 .. count-1 of 16 set (count clipped to 0 .. 16). */
static inline __mmask16 lanes(int count) {
    return count >= 16 ? (__mmask16)0xFFFF : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1);
}

/* exp_nonpositive (layers/layers.h) on 16 lanes, for the x it gets here: t - max <= 0, or NaN. Its
 * clamp of n to [-127, 127] is left out: where the result is kept (|x| <= 87.34, n in [-126, 0]) it
 * never binds, elsewhere the result is 0 whatever n is; for NaN, p is NaN and p 2^m is p's NaN at any
 * m. And its test |x| <= 87.34 (0x42aeac50) or NaN is x >= -87.34 or NaN for x <= 0: one compare
 * (unordered true). The same bits as the portable loops for every x <= 0 and NaN
 * (tests/layers/test_softmax.c: rows with -inf, +inf, NaN, -0, penalties, huge scales). 5 of the
 * row pass's ~30 operations a register fewer. */
static inline AVX512 __m512 exp16(__m512 x) {
    const __m512 shift = _mm512_set1_ps(12582912.0f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), shift), shift);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x));
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i two_n = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    const __m512 out = _mm512_mul_ps(p, _mm512_castsi512_ps(two_n));
    const __m512 lowest = _mm512_castsi512_ps(_mm512_set1_epi32((int)0xc2aeac50)); /* -(ln 2^-126), rounded */
    const __mmask16 kept = _mm512_cmp_ps_mask(x, lowest, _CMP_NLT_UQ);
    return _mm512_maskz_mov_ps(kept, out);
}

/* t = scale x + 0 (the logits pass's value, whether GCC contracts it or not: the same bits; the
 * product is rounded before t - max, which GCC would otherwise fuse into one rounding) */
static inline AVX512 __m512 logit16(__m512 x, __m512 scale) {
    return _mm512_add_ps(_mm512_mul_ps(scale, x), _mm512_setzero_ps());
}

/* Passes 2 and 3 of the softmax of R rows (in and out rows r cols apart, out may equal in), given
 * their maxima: out = e / sum, e = exp(t - max), t = scale x + 0 (scaled) or x (the caller's logits). */
static inline __attribute__((always_inline)) AVX512 void rows_exp_normalize(float *out, const float *in, const int R,
                                                                          int cols, const __m512 *max_v,
                                                                          const int scaled, __m512 s) {
    const int whole = cols / 8 * 8; /* the elements of whole 8-element groups */
    __m256 sums[4];
    float last[4][16], sum8[4][8];
    for (int r = 0; r < R; r++)
        sums[r] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= whole; c += 16) /* whole registers: both halves into the sums (kept in registers) */
        for (int r = 0; r < R; r++) {
            const __m512 x = _mm512_loadu_ps(in + (size_t)r * cols + c);
            const __m512 e = exp16(_mm512_sub_ps(scaled ? logit16(x, s) : x, max_v[r]));
            _mm512_storeu_ps(out + (size_t)r * cols + c, e);
            sums[r] = _mm256_add_ps(sums[r], _mm512_castps512_ps256(e));
            sums[r] = _mm256_add_ps(sums[r], _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
        }
    const int tail = c; /* the last register, partial (its first half may be a whole group) */
    if (c < cols) {
        const __mmask16 m = lanes(cols - c);
        for (int r = 0; r < R; r++) {
            const __m512 x = _mm512_maskz_loadu_ps(m, in + (size_t)r * cols + c);
            const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(scaled ? logit16(x, s) : x, max_v[r])));
            _mm512_mask_storeu_ps(out + (size_t)r * cols + c, m, e);
            if (c + 8 <= whole)
                sums[r] = _mm256_add_ps(sums[r], _mm512_castps512_ps256(e));
            _mm512_storeu_ps(last[r], e);
        }
    }
    __m512 inv_sum[4];
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(sum8[r], sums[r]);
        for (int e = whole; e < cols; e++) /* the last cols % 8 into sum 0, in order */
            sum8[r][0] += last[r][e - tail];
        float sum = 0.0f;
        for (int j = 0; j < 8; j++)
            sum += sum8[r][j];
        inv_sum[r] = _mm512_set1_ps(1.0f / sum);
    }
    for (c = 0; c < cols; c += 16) {
        const __mmask16 m = lanes(cols - c);
        for (int r = 0; r < R; r++) {
            float *row = out + (size_t)r * cols;
            _mm512_mask_storeu_ps(row + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + c), inv_sum[r]));
        }
    }
}

/* The softmax of R rows (rows r cols apart), their passes interleaved: a row's passes are chains of
 * dependent steps (its max, its sums), the rows' are independent. Returns 0, rows untouched, when a
 * row's scaled elements are all -inf or NaN. */
static inline __attribute__((always_inline)) AVX512 int rows_forward(float *rows, const int R, int cols, float scale) {
    const __m512 s = _mm512_set1_ps(scale);
    __m512 max16[4];
    for (int r = 0; r < R; r++)
        max16[r] = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < cols; c += 16) {
        const __mmask16 m = lanes(cols - c);
        for (int r = 0; r < R; r++) {
            const __m512 t = logit16(_mm512_maskz_loadu_ps(m, rows + (size_t)r * cols + c), s);
            max16[r] = _mm512_mask_max_ps(max16[r], m, t, max16[r]); /* t NaN: kept (vmaxps's second operand) */
        }
    }
    __m512 max_v[4];
    for (int r = 0; r < R; r++) {
        const float max = _mm512_reduce_max_ps(max16[r]);
        if (max == -INFINITY) /* nothing but -inf and NaN: the portable path's special case */
            return 0;
        max_v[r] = _mm512_set1_ps(max);
    }
    rows_exp_normalize(rows, rows, R, cols, max_v, 1, s);
    return 1;
}

AVX512 void softmax_row_probs_avx512(float *out, const float *in, int cols, float max) {
    const __m512 max_v = _mm512_set1_ps(max);
    rows_exp_normalize(out, in, 1, cols, &max_v, 0, _mm512_set1_ps(1.0f));
}

AVX512 void softmax_4rows_probs_avx512(float *rows, int cols, const float max[4]) {
    const __m512 max_v[4] = {_mm512_set1_ps(max[0]), _mm512_set1_ps(max[1]), _mm512_set1_ps(max[2]),
                             _mm512_set1_ps(max[3])};
    rows_exp_normalize(rows, rows, 4, cols, max_v, 0, _mm512_set1_ps(1.0f));
}

AVX512 int softmax_scaled_row_avx512(float *row, int cols, float scale) {
    return rows_forward(row, 1, cols, scale);
}

AVX512 int softmax_scaled_4rows_avx512(float *rows, int cols, float scale) {
    return rows_forward(rows, 4, cols, scale);
}

/* The backward of R rows (g, p and dc rows r cols apart), interleaved as rows_forward. carry
 * (residual attention): the carried scores' gradient dc += carried_scale p (g - dot) first, and
 * g = scale dc (the portable loop's c = dc + carried_scale t, a fused multiply-add). */
static inline __attribute__((always_inline)) AVX512 void rows_backward(float *g, const float *p, float *dc,
                                                                     const int R, int cols, float scale,
                                                                     const int carry, float carried_scale) {
    const int whole = cols / 8 * 8;
    __m256 dots[4];
    for (int r = 0; r < R; r++)
        dots[r] = _mm256_setzero_ps();
    for (int c = 0; c + 8 <= whole; c += 8) /* lane j: the fused chain over elements j, j+8, ... */
        for (int r = 0; r < R; r++)
            dots[r] = _mm256_fmadd_ps(_mm256_loadu_ps(g + (size_t)r * cols + c), _mm256_loadu_ps(p + (size_t)r * cols + c),
                                      dots[r]);
    __m512 dot_v[4];
    for (int r = 0; r < R; r++) {
        const float *gr = g + (size_t)r * cols, *pr = p + (size_t)r * cols;
        float dot8[8];
        _mm256_storeu_ps(dot8, dots[r]);
        for (int c = whole; c < cols; c++) /* the last cols % 8 into lane 0, in order */
            dot8[0] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(gr[c]), _mm_set_ss(pr[c]), _mm_set_ss(dot8[0])));
        float dot = 0.0f;
        for (int j = 0; j < 8; j++)
            dot += dot8[j];
        dot_v[r] = _mm512_set1_ps(dot);
    }
    const __m512 s = _mm512_set1_ps(scale), cs = _mm512_set1_ps(carried_scale);
    for (int c = 0; c < cols; c += 16) {
        const __mmask16 m = lanes(cols - c);
        for (int r = 0; r < R; r++) {
            float *gr = g + (size_t)r * cols;
            const __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + (size_t)r * cols + c),
                                           _mm512_sub_ps(_mm512_maskz_loadu_ps(m, gr + c), dot_v[r]));
            if (carry) {
                float *dcr = dc + (size_t)r * cols;
                const __m512 v = _mm512_fmadd_ps(cs, d, _mm512_maskz_loadu_ps(m, dcr + c));
                _mm512_mask_storeu_ps(dcr + c, m, v);
                _mm512_mask_storeu_ps(gr + c, m, _mm512_mul_ps(s, v));
            } else {
                _mm512_mask_storeu_ps(gr + c, m, _mm512_mul_ps(s, d));
            }
        }
    }
}

AVX512 void softmax_scaled_backward_avx512(float *g, const float *p, int cols, float scale) {
    rows_backward(g, p, NULL, 1, cols, scale, 0, 0.0f);
}

AVX512 void softmax_scaled_backward_4rows_avx512(float *g, const float *p, int cols, float scale) {
    rows_backward(g, p, NULL, 4, cols, scale, 0, 0.0f);
}

AVX512 void softmax_carried_backward_avx512(float *g, const float *p, float *dc, int cols, float scale,
                                            float carried_scale) {
    rows_backward(g, p, dc, 1, cols, scale, 1, carried_scale);
}

AVX512 void softmax_carried_backward_4rows_avx512(float *g, const float *p, float *dc, int cols, float scale,
                                                  float carried_scale) {
    rows_backward(g, p, dc, 4, cols, scale, 1, carried_scale);
}
