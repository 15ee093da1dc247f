/* Fully connected layer, out = in W^T + b, as in torch.nn.Linear. */
#include "layers/layers.h"

#include <string.h>

#include "core/common.h"

/* Rows [N,o] of out = b [o], a thread's share of the rows at a time (an orphaned region body): b
 * into its first row, then its rows so far copied after themselves, log2(rows) copies, not one a row. */
static __attribute__((noinline)) void fill_rows(float *restrict out, const float *restrict b, int N, int o) {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    const size_t n0 = (size_t)N * t / threads, rows = (size_t)N * (t + 1) / threads - n0, row = (size_t)o;
    if (rows == 0)
        return;
    float *mine = out + n0 * row;
    memcpy(mine, b, row * sizeof *out);
    for (size_t done = 1; done < rows;) {
        const size_t more = rows - done < done ? rows - done : done;
        memcpy(mine + done * row, mine, more * row * sizeof *out);
        done += more;
    }
}

/* out [N,o] = in [N,i] . W [o,i]^T + b [o]: in one call where gemm fuses the bias (fp32: the bits of
 * the fill below; bf16: b added to the finished sums), else rows of out start as b, then GEMM with
 * beta = 1. */
static void forward(Gemm *g, float *restrict out, GemmOperand in, const float *restrict W, const float *restrict b,
                    int N, int i, int o) {
    if (b && gemm_fuses_bias(g, N, o, i)) {
        gemm_bias(g, GEMM_N, GEMM_T, N, o, i, in, i, gemm_in_f32(W), i, b, out, o);
        return;
    }
    if (b)
        OMP_TEAM_OR_ALONE(fill_rows(out, b, N, o));
    gemm_operands(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, gemm_in_f32(W), i, b ? 1.0f : 0.0f, out, o);
}

void linear_forward(Gemm *g, float *out, const float *in, const float *W, const float *b, int N, int i, int o) {
    forward(g, out, gemm_in_f32(in), W, b, N, i, o);
}

void linear_forward_bf16(Gemm *g, float *out, const bf16 *in16, const float *W, const float *b, int N, int i,
                         int o) {
    forward(g, out, gemm_in_bf16(in16), W, b, N, i, o);
}

void linear_forward_to_bf16(Gemm *g, float *restrict pre, bf16 *restrict out16, const float *in, const float *W,
                            const float *restrict b, int N, int i, int o) {
    gemm(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, W, i, 0.0f, pre, o);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict x = pre + (size_t)n * o;
        bf16 *restrict y = out16 + (size_t)n * o;
#pragma omp simd
        for (int c = 0; c < o; c++)
            y[c] = bf16_from_float(x[c] + b[c]);
    }
}

/* db [o] += sum_n d_out [N,o]: threads own column blocks, rows summed in order */
static __attribute__((noinline)) void bias_sums(float *restrict db, const float *restrict d_out, int N, int o) {
    const ColBlocks blocks = col_blocks(o);
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc[COL_BLOCK_MAX] = {0};
        for (int n = 0; n < N; n++) {
            const float *restrict g = d_out + (size_t)n * o + c0;
            for (int c = 0; c < width; c++)
                acc[c] += g[c];
        }
        for (int c = 0; c < width; c++)
            db[c0 + c] += acc[c];
    }
}

static void bias_backward(float *restrict db, const float *restrict d_out, int N, int o) {
    OMP_TEAM_OR_ALONE(bias_sums(db, d_out, N, o));
}

/* d_in [N,i] = beta d_in + d_out [N,o] . W [o,i];  dW [o,i] += d_out^T . in  (the two products) */
static void products_backward(Gemm *g, float *restrict d_in, float beta, float *restrict dW, GemmOperand d_out,
                              int ld_d_out, GemmOperand in, const float *restrict W, int N, int i, int o) {
    if (d_in)
        gemm_operands(g, GEMM_N, GEMM_N, N, i, o, 1.0f, d_out, ld_d_out, gemm_in_f32(W), i, beta, d_in, i);
    gemm_operands(g, GEMM_T, GEMM_N, o, i, N, 1.0f, d_out, ld_d_out, in, i, 1.0f, dW, i);
}

/* d_out fp32: converted to bf16 once for both products in bf16 (nothing in fp32); db from it */
static void backward(Gemm *g, float *d_in, float beta, float *dW, float *db, const float *d_out, GemmOperand in,
                     const float *W, int N, int i, int o) {
    const GemmOperand staged = gemm_stage(g, d_out, (size_t)N, (size_t)o, (size_t)o);
    products_backward(g, d_in, beta, dW, staged, o, in, W, N, i, o);
    gemm_unstage(g);
    if (db)
        bias_backward(db, d_out, N, o);
}

/* d_in [N,i] = d_out [N,o] . W [o,i];  dW [o,i] += d_out^T . in;  db [o] += sum_n d_out */
void linear_backward(Gemm *g, float *d_in, float *dW, float *db, const float *d_out, const float *in,
                     const float *W, int N, int i, int o) {
    backward(g, d_in, 0.0f, dW, db, d_out, gemm_in_f32(in), W, N, i, o);
}

/* d_in [N,i] += d_out [N,o] . W [o,i] (the GEMM's beta = 1);  dW, db as linear_backward */
void linear_backward_accumulate(Gemm *g, float *d_in, float *dW, float *db, const float *d_out,
                                const float *in, const float *W, int N, int i, int o) {
    backward(g, d_in, 1.0f, dW, db, d_out, gemm_in_f32(in), W, N, i, o);
}

void linear_backward_bf16(Gemm *g, float *d_in, float *dW, float *db, const float *d_out, const bf16 *in16,
                          const float *W, int N, int i, int o) {
    backward(g, d_in, 0.0f, dW, db, d_out, gemm_in_bf16(in16), W, N, i, o);
}

void linear_backward_from_bf16(Gemm *g, float *d_in, int accumulate, float *dW, const bf16 *d_out16,
                               const float *in, const float *W, int N, int i, int o) {
    products_backward(g, d_in, accumulate ? 1.0f : 0.0f, dW, gemm_in_bf16(d_out16), o, gemm_in_f32(in), W, N, i,
                      o);
}

/* As linear_backward, d_out consumed: db from its fp32 values, then converted in place for the products. */
void linear_backward_consuming(Gemm *g, float *d_in, float *dW, float *db, float *d_out, const float *in,
                               const float *W, int N, int i, int o) {
    if (db)
        bias_backward(db, d_out, N, o);
    size_t ld_d_out;
    const GemmOperand d_out_operand = gemm_convert_in_place(g, d_out, (size_t)N, (size_t)o, &ld_d_out);
    products_backward(g, d_in, 0.0f, dW, d_out_operand, (int)ld_d_out, gemm_in_f32(in), W, N, i, o);
}
