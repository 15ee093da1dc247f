#include "optim/adamw.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"

const char *const schedule_kind_names[] = {"linear", "cosine", "constant", NULL};

void adamw_create_floats(AdamW *opt, size_t count) {
    opt->exp_avg = xalloc_floats(count);
    opt->exp_avg_sq = xalloc_floats(count);
    opt->step = 0;
}

void adamw_create(AdamW *opt, const ParamTable *table) { adamw_create_floats(opt, table->block_floats); }

void adamw_free(AdamW *opt) {
    free(opt->exp_avg);
    free(opt->exp_avg_sq);
    memset(opt, 0, sizeof *opt);
}

void adamw_step(AdamW *opt, const ParamTable *table, float *params, float *grads, const OptimConfig *cfg,
                float lr, float grad_scale) {
    adamw_step_range(opt, table, params, grads, cfg, lr, grad_scale, 0, table->block_floats, NULL);
}

/* The update of n elements (p, m, v, g [n]; p16 [n] or NULL), written once and compiled twice: for
 * the build's portable target (8 lanes) and for AVX-512 (16, by AVX512_LOOPS, where the CPU has
 * it). Each element's value comes from its own inputs through the operations below in their
 * order: the two fused multiply-adds written out (fmaf), every other product rounded (this file is
 * compiled with -ffp-contract=off, so that GCC fuses nothing of its own), the square root and the
 * divisions correctly rounded at any width; so both forms give the same bits (tests/optim/test_adamw.c)
 * and the same as the loop before them (in which GCC had fused exactly these two). The AVX-512 form
 * took 0.57x the time over the tagger's 134 k parameters: the two divisions and the square root an
 * element are most of the pass. */
static inline __attribute__((always_inline)) void update_span(float *restrict p, float *restrict m,
                                                              float *restrict v, float *restrict g,
                                                              bf16 *restrict p16, long n, const AdamWScalars *k) {
    const float grad_scale = k->grad_scale, decay = k->decay, b1 = k->b1, b2 = k->b2;
    const float step_size = k->step_size, c2_sqrt = k->c2_sqrt, eps = k->eps;
#pragma omp simd
    for (long e = 0; e < n; e++) {
        const float grad = g[e] * grad_scale;
        g[e] = 0.0f; /* consumed: the next step accumulates from zero */
        const float decayed = p[e] * decay;
        m[e] = fmaf(m[e], b1, (1.0f - b1) * grad);
        v[e] = fmaf(v[e], b2, (1.0f - b2) * grad * grad);
        p[e] = decayed - step_size * m[e] / (sqrtf(v[e]) / c2_sqrt + eps);
        if (p16) /* the bf16 copy of the new value (a constant branch: p16 NULL or not for a whole span) */
            p16[e] = bf16_from_float(p[e]);
    }
}

static void span_portable(float *p, float *m, float *v, float *g, bf16 *p16, long n, const AdamWScalars *k) {
    if (p16)
        update_span(p, m, v, g, p16, n, k);
    else
        update_span(p, m, v, g, NULL, n, k);
}

AVX512_LOOPS static void span_avx512(float *p, float *m, float *v, float *g, bf16 *p16, long n, const AdamWScalars *k) {
    if (p16)
        update_span(p, m, v, g, p16, n, k);
    else
        update_span(p, m, v, g, NULL, n, k);
}

void adamw_span_isa(int avx512, float *p, float *m, float *v, float *g, bf16 *p16, long n, const AdamWScalars *k) {
    (avx512 ? span_avx512 : span_portable)(p, m, v, g, p16, n, k);
}

void adamw_step_range(AdamW *opt, const ParamTable *table, float *params, float *grads, const OptimConfig *cfg,
                      float lr, float grad_scale, size_t lo, size_t hi, bf16 *params16) {
    opt->step++;
    float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps;
    float c1 = 1.0f, c2_sqrt = 1.0f;
    if (cfg->bias_correction) {
        c1 = (float)(1.0 - pow(b1, (double)opt->step));
        c2_sqrt = (float)sqrt(1.0 - pow(b2, (double)opt->step));
    }
    const float step_size = (float)((double)lr / c1);
    const int avx512 = cpu_has_avx512_loops();
    /* One parallel region for the whole table: each tensor's elements are split evenly among the
     * threads (no barrier between tensors: every element is independent, so any split gives the
     * same bits). */
#pragma omp parallel
    for (int t = 0; t < table->count; t++) {
        const ParamInfo *info = &table->items[t];
        size_t first = info->offset > lo ? info->offset : lo;
        size_t end = info->offset + info->count < hi ? info->offset + info->count : hi;
        if (first >= end)
            continue; /* the tensor lies outside [lo, hi) */
        const AdamWScalars k = {grad_scale, info->decay ? (float)(1.0 - (double)lr * cfg->weight_decay) : 1.0f,
                                b1, b2, step_size, c2_sqrt, eps};
        const long n = (long)(end - first), threads = omp_get_num_threads(), me = omp_get_thread_num();
        const long from = n * me / threads, to = n * (me + 1) / threads; /* this thread's part */
        adamw_span_isa(avx512, params + first + from, opt->exp_avg + (first - lo) + from,
                       opt->exp_avg_sq + (first - lo) + from, grads + first + from,
                       params16 ? params16 + first + from : NULL, to - from, &k);
    }
}

/* Sum of squares over a fixed number of chunks, added in chunk order: the result does not
 * depend on the thread count or on thread timing (an OpenMP reduction would). */
#define NORM_CHUNKS 64
double grad_global_norm(const float *grads, size_t n) { return sqrt(grad_sum_squares(grads, n)); }

double grad_sum_squares(const float *grads, size_t n) {
    double partial[NORM_CHUNKS];
#pragma omp parallel for schedule(static)
    for (int c = 0; c < NORM_CHUNKS; c++) {
        size_t lo = n * (size_t)c / NORM_CHUNKS, hi = n * (size_t)(c + 1) / NORM_CHUNKS;
        double sum = 0.0;
#pragma omp simd reduction(+ : sum) /* a fixed vector order: still independent of threads */
        for (size_t e = lo; e < hi; e++)
            sum += (double)grads[e] * grads[e];
        partial[c] = sum;
    }
    double total = 0.0;
    for (int c = 0; c < NORM_CHUNKS; c++)
        total += partial[c];
    return total;
}

GradClip grad_clip(const float *grads, size_t n, double max_norm) {
    return grad_clip_from_norm(grad_global_norm(grads, n), max_norm);
}

GradClip grad_clip_from_norm(double norm, double max_norm) {
    GradClip clip = {norm, 1.0f};
    if (max_norm > 0 && clip.norm > max_norm)
        clip.scale = (float)(max_norm / (clip.norm + 1e-6));
    return clip;
}

float lr_schedule(ScheduleKind kind, float peak, int step, int warmup_steps, int total_steps) {
    if (step < warmup_steps)
        return peak * (float)(step + 1) / (float)warmup_steps;
    if (kind == SCHED_CONSTANT || total_steps <= warmup_steps)
        return peak;
    double progress = (double)(step - warmup_steps) / (double)(total_steps - warmup_steps);
    if (progress > 1.0)
        progress = 1.0;
    if (kind == SCHED_LINEAR)
        return (float)(peak * (1.0 - progress));
    return (float)(peak * 0.5 * (1.0 + cos(3.141592653589793 * progress)));
}
