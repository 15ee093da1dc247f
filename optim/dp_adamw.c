#include "optim/dp_adamw.h"

#include <math.h>
#include <string.h>

#include "core/common.h"

void dp_adamw_create(DpAdamW *o, Dist *dist, const ParamTable *table, int sharded) {
    memset(o, 0, sizeof *o);
    o->dist = dist;
    o->sharded = sharded;
    dist_shards_create(&o->shards, table->block_floats, dist->size);
    o->lo = o->shards.lo[dist->rank];
    o->hi = o->shards.lo[dist->rank + 1];
    if (sharded)
        adamw_create_floats(&o->opt, o->hi - o->lo);
    else
        adamw_create(&o->opt, table);
}

void dp_adamw_free(DpAdamW *o) {
    dp_adamw_release(o);
    adamw_free(&o->opt);
    dist_shards_free(&o->shards);
}

GradClip dp_adamw_reduce(DpAdamW *o, float *grads, double max_norm) {
    dist_reduce_scatter_sum(o->dist, &o->shards, grads);
    double sum_squares = grad_sum_squares(grads + o->lo, o->hi - o->lo);
    dist_sum_doubles(o->dist, &sum_squares, 1);
    return grad_clip_from_norm(sqrt(sum_squares), max_norm);
}

void dp_adamw_update(DpAdamW *o, const ParamTable *table, float *params, float *grads, bf16 *params16,
                     const OptimConfig *cfg, float lr, float grad_scale) {
    if (o->sharded) {
        adamw_step_range(&o->opt, table, params, grads, cfg, lr, grad_scale, o->lo, o->hi, params16);
        zero_floats(grads, o->lo); /* the other slices hold the ring's partial sums */
        zero_floats(grads + o->hi, o->shards.n - o->hi);
        dist_allgather(o->dist, &o->shards, params);
        if (params16) { /* the other ranks' slices arrived in fp32: their bf16 copy */
            bf16_convert_floats(params16, params, o->lo);
            bf16_convert_floats(params16 + o->hi, params + o->hi, o->shards.n - o->hi);
        }
    } else {
        dist_allgather(o->dist, &o->shards, grads);
        adamw_step_range(&o->opt, table, params, grads, cfg, lr, grad_scale, 0, table->block_floats, params16);
    }
}

AdamW dp_adamw_full(DpAdamW *o, float *scratch) {
    if (!o->sharded)
        return o->opt;
    if (!o->spare)
        o->spare = xalloc_floats(o->shards.n);
    o->lent = scratch;
    return (AdamW){scratch, o->spare, o->opt.step};
}

void dp_adamw_gather(DpAdamW *o, AdamW *full) {
    if (!o->sharded)
        return;
    size_t count = o->hi - o->lo;
    memcpy(full->exp_avg + o->lo, o->opt.exp_avg, sizeof(float) * count);
    memcpy(full->exp_avg_sq + o->lo, o->opt.exp_avg_sq, sizeof(float) * count);
    dist_gather_to_root(o->dist, &o->shards, full->exp_avg);
    dist_gather_to_root(o->dist, &o->shards, full->exp_avg_sq);
    full->step = o->opt.step;
}

void dp_adamw_scatter(DpAdamW *o, const AdamW *full) {
    o->opt.step = full->step;
    if (!o->sharded)
        return;
    size_t count = o->hi - o->lo;
    memcpy(o->opt.exp_avg, full->exp_avg + o->lo, sizeof(float) * count);
    memcpy(o->opt.exp_avg_sq, full->exp_avg_sq + o->lo, sizeof(float) * count);
}

void dp_adamw_release(DpAdamW *o) {
    if (o->lent)
        zero_floats(o->lent, o->shards.n);
    o->lent = NULL;
    free(o->spare);
    o->spare = NULL;
}
