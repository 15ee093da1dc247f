/* The one matrix-product interface of the layers, in fp32 or bf16 mixed precision.
 *
 *   C [M,N] = alpha op(A) op(B) + beta C      row-major; op(X) = X or X^T;
 *   op(A) [M,K] (A stored [M,K] with row stride lda, or [K,M] when transposed), op(B) [K,N].
 *
 * fp32 (the default and the reference): cblas_sgemm (OpenBLAS), split into blocks fixed by the
 * shape (core/gemm_partition.h), each computed on one thread (gemm_f32), so the bits do not depend
 * on the thread count.
 * bf16 (mixed precision as PyTorch autocast and Megatron define it): A and B are rounded to
 * bf16 (nearest even, core/bf16.h), the products are accumulated in fp32 and C stays fp32;
 * beta C is added in fp32 (dW += in fp32). Computed by oneDNN's matmul, or by the portable
 * emulation (bf16-rounded operands, exact fp32 products, double accumulation), which is the
 * reference of the tests and the backend of hosts without bf16 instructions in tests.
 *
 * Where a bf16 operand comes from, cheapest first:
 *   - the caller gives it in bf16 (GemmOperand): an activation its producer wrote in bf16 only
 *     (the feed-forward's GELU output and its gradient, layers/layers.h);
 *   - the weights' bf16 copy: an fp32 operand inside the one weights block registered with
 *     gemm_set_weights reads the copy (its owner keeps it equal to bf16(weights));
 *   - a staged operand: gemm_stage converts a block once for several products (a gradient
 *     that feeds both backward products) and returns it, until gemm_unstage;
 *   - otherwise the product converts it into the context's scratch.
 * The scratch is laid out by gemm_create, and so are the oneDNN matmul primitives: every dimension
 * and stride is a runtime argument (core/gemm_lane.h), one primitive per (op(A), op(B), beta 0 or 1)
 * (another alpha or beta: one more on its first use), so a row count the step has not met (an
 * unpadded batch's T, a new padded length, another number of labelled positions) creates none;
 * only the memory objects of a new shape (64 kept). The context is not thread-safe: call gemm outside parallel regions.
 * gemm_f32 is stateless and may be called from inside them (the per-head attention products), and
 * so may gemm_lane (bf16 operands only), each thread on its own lane. */
#pragma once
#include <stddef.h>

#include "core/bf16.h"
#include "core/kinds.h" /* Precision */

/* Precision's config names in enum order ("fp32", "bf16"), NULL-terminated. */
extern const char *const precision_names[];

typedef enum { GEMM_N = 0, GEMM_T = 1 } GemmOp;

/* fp32: cblas_sgemm(CblasRowMajor, ...) with these arguments. */
void gemm_f32(GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
/* Whether gemm_f32 computes this product on the direct kernel (core/gemm_small.h: up to its size
 * bound, and past it where its AVX-512 kernel outruns the OpenBLAS core of the run) rather than on
 * OpenBLAS; by the shape, alpha and the host alone. */
int gemm_f32_on_small(int M, int N, int K, float alpha);

/* The bf16 reference: A, B rounded to bf16 element by element, exact products, double sums,
 * C = alpha sum + beta C rounded once to fp32. OpenMP over rows of C. */
void gemm_bf16_reference(GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);

typedef enum {
    GEMM_BF16_ONEDNN = 0, /* oneDNN matmul: needs avx512_bf16 or amx_bf16 (cpu_bf16_query) */
    GEMM_BF16_EMULATED,   /* gemm_bf16_reference's arithmetic on the same bf16 operands */
} GemmBackend;

/* The backend of bf16 runs on this host: GEMM_BF16_ONEDNN, or GEMM_BF16_EMULATED when the
 * environment switch REALPOS_BF16_EMULATE is on (env_switch: 1, yes, true, on; tests on hosts
 * without bf16; slow). */
GemmBackend gemm_host_backend(void);
/* Whether bf16 runs here: the CPU has bf16 instructions (cpu, filled in either way, says which),
 * or the emulation is selected. */
int gemm_bf16_runs_here(CpuBf16 *cpu);
/* Fatal unless bf16 runs here: "<setting>: bf16 needs a CPU with avx512_bf16 or amx_bf16; this
 * one (<cpu>) has neither: use fp32". No-op for fp32. */
void gemm_require_precision(Precision precision, const char *setting);

typedef struct Gemm Gemm;

/* fp32 needs no context (NULL works everywhere a Gemm * is taken). bf16: scratch for one
 * staged operand of up to stage_floats elements and for two converted operands of up to
 * convert_floats each; a product whose operand does not fit is a fatal error naming the sizes. */
Gemm *gemm_create(Precision precision, GemmBackend backend, size_t stage_floats, size_t convert_floats);
void gemm_free(Gemm *g);
/* PRECISION_FP32 for g == NULL. */
Precision gemm_precision(const Gemm *g);
/* What computes the products: "OpenBLAS" (fp32), "oneDNN" or "emulated" (bf16). */
const char *gemm_engine_name(const Gemm *g);
/* The library computing `precision`'s products (bf16: on `backend`) and its version as loaded at run
 * time, for keys that must change with it: "OpenBLAS-0.3.21", "oneDNN-2.6.3", "emulated". */
void gemm_engine_version(Precision precision, GemmBackend backend, char *out, size_t size);
/* What computes g's bf16 products (GEMM_BF16_ONEDNN for g == NULL, an fp32 context). */
GemmBackend gemm_backend(const Gemm *g);

/* The weights' bf16 copy: weights16 [count] = bf16(weights [count]), laid out as weights (one
 * block: a model's parameters). An fp32 operand inside the block is read from the copy; the
 * caller keeps the copy current (AdamW's update pass writes it). Fatal in an fp32 context. */
void gemm_set_weights(Gemm *g, const float *weights, size_t count, const bf16 *weights16);

/* An operand of a product: fp32 (f32), or already bf16 (b16: bf16 contexts only), never both. */
typedef struct {
    const float *f32;
    const bf16 *b16;
} GemmOperand;
static inline GemmOperand gemm_in_f32(const float *x) { return (GemmOperand){x, NULL}; }
static inline GemmOperand gemm_in_bf16(const bf16 *x) { return (GemmOperand){NULL, x}; }

/* Convert x [rows, cols] (row stride ld) once, for the products until gemm_unstage; one staged
 * block at a time. Returns the operand the products read: the staged bf16 block (row stride ld)
 * in bf16, x itself in fp32 (where it is a no-op). */
GemmOperand gemm_stage(Gemm *g, const float *x, size_t rows, size_t cols, size_t ld);
void gemm_unstage(Gemm *g);
/* The same for a block x [rows, cols] (row stride cols) that nothing reads in fp32 afterwards, with
 * no scratch: bf16 rounds each row into the first half of its own storage (x's fp32 values are
 * lost) and returns it with *ld = 2 cols; fp32 returns x with *ld = cols. For the decoder's d_logits
 * [M, V], the largest operand of a step, which a staged copy would double. */
GemmOperand gemm_convert_in_place(Gemm *g, float *x, size_t rows, size_t cols, size_t *ld);

/* C = alpha op(A) op(B) + beta C in the context's precision (fp32: gemm_f32). */
void gemm(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc);
/* C [M,N] = rows of bias [N] + op(A) op(B): a linear layer's output without the pass that fills C
 * with the bias and the product's read of it. Only where gemm_fuses_bias (else a fatal error; fill C
 * and use gemm): in fp32 a product core/gemm_small.h computes, each element's chain of products
 * started from bias [n] (the bits of the fill and then gemm with beta 1); in bf16 an A B^T product
 * on oneDNN's lanes (a training or evaluation context, outside parallel regions), bias [n] added to
 * each element's finished sum (oneDNN's matmul bias; the fill and beta 1 add it first). */
int gemm_fuses_bias(const Gemm *g, int M, int N, int K);
void gemm_bias(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, GemmOperand A, int lda, GemmOperand B, int ldb,
               const float *bias, float *C, int ldc);
/* The same with typed operands: a bf16 one is read as it is (row stride lda / ldb in elements). */
void gemm_operands(Gemm *g, GemmOp ta, GemmOp tb, int M, int N, int K, float alpha, GemmOperand A, int lda,
                   GemmOperand B, int ldb, float beta, float *C, int ldc);

/* ---- products inside a parallel region: the per-(sequence, head) attention products --------------
 * gemm_lane: C [M,N] = op(A) op(B) + beta C (beta 0 or 1) with A, B in bf16, fp32 accumulation and C,
 * computed by the calling thread alone on lane `lane` (its thread number, < the lanes reserved).
 * oneDNN: the context's runtime-shape primitives (above), created by gemm_create; per lane a stream
 * and scratchpad made by gemm_reserve_lanes at start-up, so a length the step has not seen (an
 * unpadded sequence's own L) creates no primitive, only the lane's three memory objects for that
 * shape (kept, 64 shapes a lane). The emulated backend: gemm_bf16_reference's arithmetic, bit for bit. */
void gemm_reserve_lanes(Gemm *g, int lanes); /* a bf16 context, once, before any gemm_lane */
int gemm_lanes_reserved(const Gemm *g);      /* 0 for fp32 or before gemm_reserve_lanes */
/* 1 when the context shares a dense bf16 product among the threads in one block a thread
 * (core/gemm_partition.h's gemm_partition_threads: oneDNN's elements checked not to depend on the
 * block, gemm_lanes_extent_invariant), 0 for the blocks fixed by the shape (gemm_partition; also
 * with REALPOS_GEMM_FIXED_GRID=1, for comparisons) or before gemm_reserve_lanes. */
int gemm_blocks_by_threads(const Gemm *g);
void gemm_lane(Gemm *g, int lane, GemmOp ta, GemmOp tb, int M, int N, int K, const bf16 *A, int lda,
               const bf16 *B, int ldb, float beta, float *C, int ldc);

/* One product shape of a step: C [M,N] = op(A) op(B) + beta C, operands contiguous. */
typedef struct {
    GemmOp ta, tb;
    int M, N, K;
    float beta;
} GemmShape;
/* One probe of the bf16 peak (train/loop/peak.h): the products `shapes` [count] on `backend`, operands
 * already in bf16 (nothing converted), each product run once untimed, then one
 * timed pass over all of them: sum of 2 M N K over the pass's seconds, in GFLOP/s. The operands are
 * laid out in `borrowed` [borrowed_floats] when they fit (memory the caller holds dead meanwhile,
 * e.g. a training step's activations between steps: the probe then adds nothing to the run's
 * peak memory), else allocated and freed; the context is made and freed. Call it between steps.
 * own_bytes (or NULL): the bytes of operands it allocated, 0 when they lay in `borrowed`. */
double gemm_bf16_shapes_gflops(GemmBackend backend, const GemmShape *shapes, int count, float *borrowed,
                               size_t borrowed_floats, size_t *own_bytes);

/* What a bf16 context did (for bench): products, their FLOPs and seconds, floats converted and seconds
 * converting (inside gemm and gemm_stage), oneDNN primitives created (9 by gemm_create, then none
 * unless another alpha or beta is met), and the oneDNN implementation of the last one created (e.g.
 * "gemm:jit"). */
typedef struct {
    long products, primitives_created;
    double product_seconds, convert_seconds;
    double converted_floats;
    double product_flops; /* 2 M N K summed over the products */
    long lane_products;   /* gemm_lane's (summed over lanes; lane_seconds is thread-seconds) */
    double lane_flops, lane_seconds;
    char implementation[48];
} GemmStats;
GemmStats gemm_stats(const Gemm *g);
