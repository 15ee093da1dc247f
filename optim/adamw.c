#include "optim/adamw.h"

#include <math.h>
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

void adamw_step_range(AdamW *opt, const ParamTable *table, float *params, float *grads, const OptimConfig *cfg,
                      float lr, float grad_scale, size_t lo, size_t hi, bf16 *params16) {
    opt->step++;
    float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps;
    float c1 = 1.0f, c2_sqrt = 1.0f;
    if (cfg->bias_correction) {
        c1 = (float)(1.0 - pow(b1, (double)opt->step));
        c2_sqrt = (float)sqrt(1.0 - pow(b2, (double)opt->step));
    }
    float step_size = (float)((double)lr / c1);
    /* One parallel region for the whole table: each tensor's elements are split statically
     * (no barrier between tensors: every element is independent). */
#pragma omp parallel
    for (int t = 0; t < table->count; t++) {
        const ParamInfo *info = &table->items[t];
        size_t first = info->offset > lo ? info->offset : lo;
        size_t end = info->offset + info->count < hi ? info->offset + info->count : hi;
        if (first >= end)
            continue; /* the tensor lies outside [lo, hi) */
        float decay = info->decay ? (float)(1.0 - (double)lr * cfg->weight_decay) : 1.0f;
        float *restrict p = params + first;
        float *restrict m = opt->exp_avg + (first - lo);
        float *restrict v = opt->exp_avg_sq + (first - lo);
        float *restrict g = grads + first;
        bf16 *restrict p16 = params16 ? params16 + first : NULL;
        long n = (long)(end - first);
        if (p16) { /* the same arithmetic, plus the bf16 copy of the new value */
#pragma omp for schedule(static) nowait
            for (long e = 0; e < n; e++) {
                const float grad = g[e] * grad_scale;
                g[e] = 0.0f;
                p[e] *= decay;
                m[e] = b1 * m[e] + (1.0f - b1) * grad;
                v[e] = b2 * v[e] + (1.0f - b2) * grad * grad;
                p[e] -= step_size * m[e] / (sqrtf(v[e]) / c2_sqrt + eps);
                p16[e] = bf16_from_float(p[e]);
            }
            continue;
        }
#pragma omp for schedule(static) nowait
        for (long e = 0; e < n; e++) {
            const float grad = g[e] * grad_scale;
            g[e] = 0.0f; /* consumed: the next step accumulates from zero */
            p[e] *= decay;
            m[e] = b1 * m[e] + (1.0f - b1) * grad;
            v[e] = b2 * v[e] + (1.0f - b2) * grad * grad;
            p[e] -= step_size * m[e] / (sqrtf(v[e]) / c2_sqrt + eps);
        }
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
