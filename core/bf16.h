/* bfloat16: the upper 16 bits of an IEEE fp32 (1 sign, 8 exponent, 7 mantissa bits), the
 * operand type of mixed-precision matrix products (core/gemm.h).
 *
 *   bf16_from_float   round to nearest, ties to even (as PyTorch, oneDNN and vcvtneps2bf16);
 *                     NaN stays NaN (quieted), +-inf and overflow to +-inf as IEEE rounding does.
 *   bf16_to_float     exact (a bf16 is an fp32 with 16 zero low bits).
 *
 * The product of two bf16 values is exact in fp32 (8 + 8 significant bits <= 24), so a bf16
 * matrix product differs from its emulation (gemm_bf16_reference, core/gemm.h) only in the order and
 * width of the accumulation. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t bf16;

static inline bf16 bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* + half an ulp, - 1 on even ties */
    const uint32_t quiet_nan = (u >> 16) | 0x0040u; /* NaN: sign and payload top kept, quiet bit set */
    return (bf16)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded); /* a select: vectorizes */
}

static inline float bf16_to_float(bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to the nearest bf16 and back: the value a bf16 operand carries. */
static inline float bf16_round(float f) { return bf16_to_float(bf16_from_float(f)); }

/* out[r * ld_out + c] = bf16(in[r * ld_in + c]) for r < rows, c < cols (OpenMP over rows; call
 * outside parallel regions). */
void bf16_convert(bf16 *out, size_t ld_out, const float *in, size_t ld_in, size_t rows, size_t cols);
/* The contiguous case: out[e] = bf16(in[e]), e < n. */
void bf16_convert_floats(bf16 *out, const float *in, size_t n);

/* ---- the host's bf16 instructions ---------------------------------------------------------
 * Whether this CPU (and OS) executes AVX512-BF16 or AMX-BF16, from cpuid and xgetbv, so that
 * a bf16 run can be refused before anything is allocated. REALPOS_NO_BF16 on in the environment
 * (env_switch: 1, yes, true, on) makes the check answer "no" (tests of the refusal on any host). */
typedef struct {
    int avx512_bf16, amx_bf16; /* instruction set present and enabled by the OS */
    char cpu[64];              /* brand string, e.g. "AMD EPYC 9R14 96-Core Processor" */
} CpuBf16;

CpuBf16 cpu_bf16_query(void);
static inline int cpu_bf16_available(const CpuBf16 *c) { return c->avx512_bf16 || c->amx_bf16; }
/* One line for --version and bench: "bf16: available (avx512_bf16) on <cpu>" or
 * "bf16: not available on <cpu> (no avx512_bf16, amx_bf16)". */
void cpu_bf16_describe(const CpuBf16 *c, char *out, size_t size);
