/* bf16 conversion and the host check (core/bf16.h). */
#include "core/bf16.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/common.h"

void bf16_convert(bf16 *out, size_t ld_out, const float *in, size_t ld_in, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *restrict src = in + r * ld_in;
        bf16 *restrict dst = out + r * ld_out;
#pragma omp simd
        for (size_t c = 0; c < cols; c++)
            dst[c] = bf16_from_float(src[c]);
    }
}

void bf16_convert_floats(bf16 *out, const float *in, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t e = 0; e < n; e++)
        out[e] = bf16_from_float(in[e]);
}

/* XCR0 bits the OS sets when it saves the AVX-512 (opmask, ZMM) and AMX (tile) state. */
static unsigned long long xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

CpuBf16 cpu_bf16_query(void) {
    CpuBf16 c = {0, 0, "unknown CPU"};
    unsigned int a, b, cx, d;
    if ((unsigned int)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) { /* int in clang */
        unsigned int brand[12];
        for (unsigned int i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &brand[4 * i], &brand[4 * i + 1], &brand[4 * i + 2], &brand[4 * i + 3]);
        char text[49];
        memcpy(text, brand, 48);
        text[48] = 0;
        const char *s = text;
        while (*s == ' ')
            s++;
        snprintf(c.cpu, sizeof c.cpu, "%s", s);
        for (size_t n = strlen(c.cpu); n > 0 && c.cpu[n - 1] == ' '; n--)
            c.cpu[n - 1] = 0;
    }
    if (env_switch("REALPOS_NO_BF16", 0))
        return c;
    if (!__get_cpuid(1, &a, &b, &cx, &d) || !(cx & bit_OSXSAVE) || __get_cpuid_max(0, NULL) < 7)
        return c;
    const unsigned long long state = xcr0();
    const int avx512_state = (state & 0xe6) == 0xe6;         /* SSE, AVX, opmask, ZMM hi/lo */
    const int amx_state = (state & 0x60000) == 0x60000;      /* XTILECFG, XTILEDATA */
    __cpuid_count(7, 0, a, b, cx, d);
    const int avx512f = (b >> 16) & 1, amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    __cpuid_count(7, 1, a, b, cx, d);
    const int avx512_bf16 = (a >> 5) & 1;
    c.avx512_bf16 = avx512_state && avx512f && avx512_bf16;
    c.amx_bf16 = amx_state && amx_tile && amx_bf16;
    return c;
}

void cpu_bf16_describe(const CpuBf16 *c, char *out, size_t size) {
    if (cpu_bf16_available(c))
        snprintf(out, size, "bf16: available (%s%s%s) on %s", c->avx512_bf16 ? "avx512_bf16" : "",
                 c->avx512_bf16 && c->amx_bf16 ? ", " : "", c->amx_bf16 ? "amx_bf16" : "", c->cpu);
    else
        snprintf(out, size, "bf16: not available on %s (no avx512_bf16, amx_bf16)", c->cpu);
}
