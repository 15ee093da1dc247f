/* AdamW (Loshchilov & Hutter), bit-for-bit the update of torch.optim.AdamW:
 *   p <- p (1 - lr wd)                       (wd = 0 for LayerNorm parameters and biases)
 *   m <- b1 m + (1 - b1) g;   v <- b2 v + (1 - b2) g^2
 *   p <- p - (lr / c1) m / (sqrt(v) / sqrt(c2) + eps),   c_i = 1 - b_i^t  (1 without bias correction)
 * plus global gradient-norm clipping and the learning-rate schedules. */
#pragma once
#include <stdint.h>

#include "../core/config.h"
#include "../core/param_table.h"

typedef struct {
    float *exp_avg, *exp_avg_sq; /* parameter-shaped blocks */
    int64_t step;                /* number of updates taken */
} AdamW;

void adamw_create(AdamW *opt, const ParamTable *table);
void adamw_free(AdamW *opt);
/* One update of every tensor in the table with learning rate lr. */
void adamw_step(AdamW *opt, const ParamTable *table, float *params, const float *grads,
                const OptimConfig *cfg, float lr);

/* L2 norm of a whole block (double accumulation, deterministic for a thread count). */
double grad_global_norm(const float *grads, size_t n);
/* Scale grads so their norm is at most max_norm (no-op if max_norm <= 0); returns the norm
 * before clipping. */
double grad_clip(float *grads, size_t n, double max_norm);

/* Learning rate at `step` (0-based): linear warmup to peak over warmup_steps, then linear decay
 * to 0, cosine decay to 0, or constant until total_steps. */
float lr_schedule(ScheduleKind kind, float peak, int step, int warmup_steps, int total_steps);
