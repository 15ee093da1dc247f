/* AdamW (Loshchilov & Hutter), the update of torch.optim.AdamW in the same formula and order:
 *   p <- p (1 - lr wd)                       (wd = 0 for LayerNorm parameters and biases)
 *   m <- b1 m + (1 - b1) g;   v <- b2 v + (1 - b2) g^2
 *   p <- p - (lr / c1) m / (sqrt(v) / sqrt(c2) + eps),   c_i = 1 - b_i^t  (1 without bias correction)
 * plus global gradient-norm clipping and the learning-rate schedules.
 * What is checked (not bit-for-bit equality): tests/train/model/test_parity.sh runs 20 float32 steps against
 * tests/reference/reference.py (loss per step within 1e-4 relative, final parameters within 1e-2 of
 * lr x steps; with and without bias correction), and the reference's own step equals
 * torch.optim.AdamW in float64 to 1e-14 (tests/reference/reference_selftest.py). */
#pragma once
#include <stdint.h>

#include "core/bf16.h"
#include "core/kinds.h" /* ScheduleKind */
#include "core/param_table.h"
#include "optim/optim_config.h"

/* ScheduleKind (core/kinds.h): the learning-rate schedules after warmup (lr_schedule below). Their
 * config names in enum order ("linear", "cosine", "constant"), NULL-terminated. */
extern const char *const schedule_kind_names[];

typedef struct {
    float *exp_avg, *exp_avg_sq; /* parameter-shaped blocks */
    int64_t step;                /* number of updates taken */
} AdamW;

void adamw_create(AdamW *opt, const ParamTable *table);
/* Moments for `count` floats only: a ZeRO-1 shard of the block (optim/dp_adamw.h). */
void adamw_create_floats(AdamW *opt, size_t count);
void adamw_free(AdamW *opt);
/* One update of every tensor in the table with learning rate lr, using grads * grad_scale as
 * the gradient (grad_scale carries the clipping factor, so clipping costs no extra pass).
 * The update consumes the gradient: each element is set to 0 once read, which leaves the block
 * ready for the next step's accumulation (+=) at no cost, the line being in cache already
 * (a separate zeroing pass took 2.2 ms of a bert-mini step with 2 threads; this one, ~0.2 ms).
 * Alignment padding between tensors is not touched. */
void adamw_step(AdamW *opt, const ParamTable *table, float *params, float *grads, const OptimConfig *cfg,
                float lr, float grad_scale);
/* The same update for the elements [lo, hi) of the block only, opt's moments holding those
 * elements (exp_avg[e - lo]); element by element the arithmetic of adamw_step, so updating every
 * shard gives the bits of one whole-block update. Zeroes grads[lo, hi) as adamw_step does.
 * params16: NULL, or the parameters' bf16 copy (mixed precision: the owner of the precision,
 * train/model/model.h Activations, lends it), laid out as params: the update pass writes
 * params16[e] = bf16(params[e]) beside each updated element, so the copy needs no sweep of its own. */
void adamw_step_range(AdamW *opt, const ParamTable *table, float *params, float *grads, const OptimConfig *cfg,
                      float lr, float grad_scale, size_t lo, size_t hi, bf16 *params16);

/* The update's scalars for one tensor: the gradient's scale, the decay factor 1 - lr wd (1 for no
 * decay), beta1, beta2, lr / c1, sqrt(c2) and eps. */
typedef struct {
    float grad_scale, decay, b1, b2, step_size, c2_sqrt, eps;
} AdamWScalars;
/* The update of n elements of one tensor (p, m, v, g [n], p16 [n] or NULL) as adamw_step_range makes
 * it: avx512 0, the portable loop; 1, the same loop for AVX-512 (where cpu_has_avx512_loops()), with
 * the same bits. For the tests; adamw_step_range picks the CPU's. */
void adamw_span_isa(int avx512, float *p, float *m, float *v, float *g, bf16 *p16, long n, const AdamWScalars *k);

/* L2 norm of a whole block: double accumulation over fixed chunks added in order, so the result
 * does not depend on the thread count. */
double grad_global_norm(const float *grads, size_t n);
/* Its square (the same fixed chunks), for norms whose block is spread over several ranks. */
double grad_sum_squares(const float *grads, size_t n);

typedef struct {
    double norm; /* before clipping */
    float scale; /* max_norm / norm when the norm exceeds max_norm > 0, else 1 */
} GradClip;
GradClip grad_clip(const float *grads, size_t n, double max_norm);
GradClip grad_clip_from_norm(double norm, double max_norm);

/* Learning rate at `step` (0-based): linear warmup to peak over warmup_steps, then linear decay
 * to 0, cosine decay to 0, or constant until total_steps. */
float lr_schedule(ScheduleKind kind, float peak, int step, int warmup_steps, int total_steps);
