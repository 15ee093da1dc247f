/* The direct fp32 kernel for small products on AVX-512 (core/gemm_small.h): the same chains as the
 * AVX2 kernel (core/gemm_small.c), element for element, on 16-float registers.
 *
 * C is computed in blocks of up to MR x NR = 8 x 32 elements held in 16 registers (a strip of at
 * most 16 columns: NARROW_MR x 16, 30 registers), by core/gemm_small_driver.c's loop; every load and
 * store of a partial strip is masked (the masked-off lanes are neither read nor written). op(B) is
 * read in place when it is B and fewer than PACK_ROWS_MIN rows of C read it, else a strip of NR
 * columns and up to KC values of k is copied into a panel (panel [k][NR], columns past N zero):
 * 1.05x on the products of a width-64 model's linear layers (scripts/dev/gemm_small.sh), as B's rows
 * a power-of-two stride apart fall into a few L1 sets; op(A) is read where it lies, one broadcast per
 * row and k. Compiled for AVX-512F through function attributes; called only on a CPU that has it
 * (gemm_small_isa_runs_here). */
#include "core/gemm_small_avx512.h"

#include <immintrin.h>
#include <stddef.h>

#include "core/gemm_small_driver.h"

#define AVX512 __attribute__((target("avx512f")))

enum { MR = 8, NR = 32, KC = 256, PACK_ROWS_MIN = 64, PACK_AHEAD = 8, NARROW_MR = 30 };
enum { PASS_UNIT = 120 }; /* the least common multiple of MR and NARROW_MR */
_Static_assert(NARROW_MR <= 4 * MR, "the block's four bases of A's rows");

/* Lanes 0 .. count-1 of 16 set (count clipped to 0 .. 16). */
static inline __mmask16 lanes(int count) {
    return count >= 16 ? (__mmask16)0xFFFF : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1);
}

/* B in place for fewer than PACK_ROWS_MIN rows of C (above). */
static int reads_b_in_place(int nc, int mc) {
    (void)nc;
    return mc < PACK_ROWS_MIN;
}

/* panel [kc][NR] = B [k0 .. k0+kc, n0 .. n0+nc], columns nc .. NR zero. */
static AVX512 void pack_rows(float *restrict panel, const float *B, int ldb, int k0, int kc, int n0, int nc) {
    const __mmask16 mask0 = lanes(nc), mask1 = lanes(nc - 16);
    for (int k = 0; k < kc; k++) {
        const float *row = B + (size_t)(k0 + k) * ldb + n0;
        if (k + PACK_AHEAD < kc) { /* the row PACK_AHEAD on (a dW's activations come back from L2 or L3) */
            __builtin_prefetch(row + (size_t)PACK_AHEAD * ldb, 0, 3);
            __builtin_prefetch(row + (size_t)PACK_AHEAD * ldb + 16, 0, 3);
        }
        _mm512_store_ps(panel + (size_t)k * NR, _mm512_maskz_loadu_ps(mask0, row));
        _mm512_store_ps(panel + (size_t)k * NR + 16, _mm512_maskz_loadu_ps(mask1, row + 16));
    }
}

/* The 16 x 16 block in r transposed in place (r[i] [j] becomes r[j] [i]): 4 stages of 16 shuffles,
 * pairs of rows, of pairs, of 128-bit lanes, of 256-bit halves (64 shuffles for 256 elements; 8 x 8
 * tiles in AVX2 registers take 96, and twice the loads and stores). */
static inline AVX512 void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) { /* lane L of t[i]: rows i, i+1 at columns 4L, 4L+1; t[i+1] 4L+2, 4L+3 */
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* lane L of u[i + m]: rows i .. i+3 of column 4L + m */
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int m = 0; m < 4; m++) { /* column m, 4+m, 8+m, 12+m: lane L of the four row groups' u */
        const __m512 w0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44), w1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
        const __m512 w2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
        const __m512 w3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
        r[m] = _mm512_shuffle_f32x4(w0, w2, 0x88);
        r[4 + m] = _mm512_shuffle_f32x4(w0, w2, 0xDD);
        r[8 + m] = _mm512_shuffle_f32x4(w1, w3, 0x88);
        r[12 + m] = _mm512_shuffle_f32x4(w1, w3, 0xDD);
    }
}

/* panel [kc][NR] = op(B) [k0 .. k0+kc, n0 .. n0+nc] for op(B) = B^T (B [N,K], row stride ldb),
 * columns nc .. NR zero: 16 x 16 tiles transposed in registers, a tile's rows past nc zero and its k
 * past kc neither read (masked loads) nor stored. A head's keys (K = 16) are one tile row each: the
 * scores' product Q.K^T packs a strip of 32 keys as two tiles. */
static AVX512 void pack_transposed(float *restrict panel, const float *B, int ldb, int k0, int kc, int n0, int nc) {
    for (int j0 = 0; j0 < NR; j0 += 16) { /* 16 rows of B at a time */
        const int rows = nc - j0 >= 16 ? 16 : nc - j0 > 0 ? nc - j0 : 0;
        const float *tile_rows = B + (size_t)(n0 + j0) * ldb + k0;
        for (int k = 0; k < kc; k += 16) {
            const int ks = kc - k < 16 ? kc - k : 16;
            const __mmask16 k_mask = lanes(ks);
            __m512 r[16];
            for (int j = 0; j < 16; j++)
                r[j] = j < rows ? _mm512_maskz_loadu_ps(k_mask, tile_rows + (size_t)j * ldb + k) : _mm512_setzero_ps();
            transpose16(r);
            for (int i = 0; i < ks; i++)
                _mm512_store_ps(panel + (size_t)(k + i) * NR + j0, r[i]);
        }
    }
}

/* The row of C at *cursor; *cursor steps ldc on, opaque to GCC, which would otherwise hold up to
 * 30 rows' addresses apart and spill them to the stack: the block reaches its rows through one
 * pointer. */
static inline __attribute__((always_inline)) float *next_row(float **cursor, int ldc) {
    float *row = *cursor;
    *cursor += ldc;
    __asm__("" : "+r"(*cursor));
    return row;
}

/* GemmSmallBlock (core/gemm_small_driver.h) for MR x NR, halves of 16 columns. */
static inline __attribute__((always_inline)) AVX512 void block(const int rows, const int halves,
                                                               const int a_transposed, int kc, const float *A,
                                                               size_t ld_a, const float *b, size_t ld_b, float *C,
                                                               int ldc, int cols, int first, float beta,
                                                               const float *bias) {
    const size_t rs = a_transposed ? 1 : ld_a, cs = a_transposed ? ld_a : 1;
    const __mmask16 mask0 = lanes(cols), mask1 = lanes(cols - 16);
    const __m512 scale = _mm512_set1_ps(beta);
    __m512 acc[NARROW_MR][2]; /* rows <= MR, or (halves 1) <= NARROW_MR */
    float *c_in = C;
#pragma GCC unroll 30
    for (int r = 0; r < rows; r++) {
        const float *c = next_row(&c_in, ldc);
        if (first && bias) { /* every row's chains from the bias */
            acc[r][0] = _mm512_maskz_loadu_ps(mask0, bias);
            acc[r][1] = halves > 1 ? _mm512_maskz_loadu_ps(mask1, bias + 16) : acc[r][0];
            continue;
        }
        if (first && beta == 0.0f) {
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            continue;
        }
        acc[r][0] = _mm512_maskz_loadu_ps(mask0, c);
        acc[r][1] = halves > 1 ? _mm512_maskz_loadu_ps(mask1, c + 16) : acc[r][0];
        if (first) {
            acc[r][0] = _mm512_mul_ps(acc[r][0], scale);
            if (halves > 1)
                acc[r][1] = _mm512_mul_ps(acc[r][1], scale);
        }
    }
    for (int k = 0; k < kc; k++) {
        const float *row = b + (size_t)k * ld_b;
        const __m512 b0 = _mm512_maskz_loadu_ps(mask0, row);
        const __m512 b1 = halves > 1 ? _mm512_maskz_loadu_ps(mask1, row + 16) : b0;
        /* op(A) = A: rows g MR .. g MR + 7 from base g at rows 0 .. 7's offsets, the bases past the
         * first opaque to GCC, which would otherwise hold every row's offset, more than the general
         * registers, in vector registers; op(A) = A^T: the rows' elements side by side, at constant
         * offsets from one base */
        const float *a = A + (size_t)k * cs, *group[4] = {a, a + (size_t)MR * rs, a + (size_t)(2 * MR) * rs,
                                                          a + (size_t)(3 * MR) * rs};
        if (!a_transposed && rows > MR)
            __asm__("" : "+r"(group[1]));
        if (!a_transposed && rows > 2 * MR)
            __asm__("" : "+r"(group[2]));
        if (!a_transposed && rows > 3 * MR)
            __asm__("" : "+r"(group[3]));
#pragma GCC unroll 30
        for (int r = 0; r < rows; r++) {
            const __m512 x = _mm512_set1_ps(a_transposed ? a[r] : group[r / MR][(size_t)(r % MR) * rs]);
            acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
            if (halves > 1)
                acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
        }
    }
    float *c_out = C;
#pragma GCC unroll 30
    for (int r = 0; r < rows; r++) {
        float *c = next_row(&c_out, ldc);
        _mm512_mask_storeu_ps(c, mask0, acc[r][0]);
        if (halves > 1)
            _mm512_mask_storeu_ps(c + 16, mask1, acc[r][1]);
    }
}

GEMM_SMALL_BLOCKS(block_fns, 8, AVX512)
_Static_assert(sizeof block_fns / sizeof *block_fns == MR && KC * NR <= GEMM_SMALL_PANEL_FLOATS, "MR, KC x NR");

/* The narrow strips' blocks (one half, up to NARROW_MR = 30 rows: 30 chains in flight, not 8),
 * [rows - 1][op(A) transposed]: rows 1 .. 8 are block_fns' entries, rows 9 .. 30 defined here alike.
 * 16 rows against 8 at a head's shapes (scripts/dev/gemm_small.sh, time against OpenBLAS's, 3 rounds):
 * NN 122 x 16 x 122 0.549 -> 0.482, TN 62 x 16 x 62 0.501 -> 0.448-0.462. 30 rows against 16, with C's
 * rows reached by one stepped pointer (scripts/dev/gemm_xsmm.sh, time against libxsmm's JIT kernels,
 * medians of 11 rounds, the same bits): TN 60 x 16 x 60 1.13-1.18 -> 1.06, NN 1.17-1.26 -> 1.10, TN
 * 33 x 16 x 60 1.40 -> 1.18, NN 20 x 16 x 20 1.60-1.75 -> 1.51. */
#define NARROW_FNS(rows) GEMM_SMALL_BLOCK_FN_(AVX512, rows, 1, 0) GEMM_SMALL_BLOCK_FN_(AVX512, rows, 1, 1)
NARROW_FNS(9) NARROW_FNS(10) NARROW_FNS(11) NARROW_FNS(12) NARROW_FNS(13) NARROW_FNS(14) NARROW_FNS(15) NARROW_FNS(16)
NARROW_FNS(17) NARROW_FNS(18) NARROW_FNS(19) NARROW_FNS(20) NARROW_FNS(21) NARROW_FNS(22) NARROW_FNS(23) NARROW_FNS(24)
NARROW_FNS(25) NARROW_FNS(26) NARROW_FNS(27) NARROW_FNS(28) NARROW_FNS(29) NARROW_FNS(30)
#define ONE_HALF(rows) {block_##rows##_1_0, block_##rows##_1_1},
static const GemmSmallBlock narrow_fns[NARROW_MR][2] = {
    ONE_HALF(1) ONE_HALF(2) ONE_HALF(3) ONE_HALF(4) ONE_HALF(5) ONE_HALF(6) ONE_HALF(7) ONE_HALF(8)
    ONE_HALF(9) ONE_HALF(10) ONE_HALF(11) ONE_HALF(12) ONE_HALF(13) ONE_HALF(14) ONE_HALF(15) ONE_HALF(16)
    ONE_HALF(17) ONE_HALF(18) ONE_HALF(19) ONE_HALF(20) ONE_HALF(21) ONE_HALF(22) ONE_HALF(23) ONE_HALF(24)
    ONE_HALF(25) ONE_HALF(26) ONE_HALF(27) ONE_HALF(28) ONE_HALF(29) ONE_HALF(30)};
_Static_assert(PASS_UNIT % MR == 0 && PASS_UNIT % NARROW_MR == 0, "a pass in whole blocks of either height");
const GemmSmallKernel gemm_small_avx512_kernel = {.mr = MR,
                                                  .nr = NR,
                                                  .kc = KC,
                                                  .blocks = block_fns,
                                                  .narrow_blocks = narrow_fns,
                                                  .narrow_mr = NARROW_MR,
                                                  .pass_unit = PASS_UNIT,
                                                  .reads_b_in_place = reads_b_in_place,
                                                  .pack_rows = pack_rows,
                                                  .pack_transposed = pack_transposed};
