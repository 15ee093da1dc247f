/* Data-parallel AdamW: the update of a step whose gradients are spread over the ranks of an MPI
 * job (optim/dist.h), with optional ZeRO stage 1 (sharded optimizer moments).
 *
 *   dp_adamw_reduce   ring reduce-scatter of the gradient block: each rank holds the sum of its
 *                     micro-batches' gradients (the backward scaled them by 1 / micro-batches of
 *                     the whole step), so the sum over ranks is the step's mean gradient; the
 *                     global norm from each rank's slice (fixed chunks, ranks added in order).
 *   dp_adamw_update   unsharded: all-gather the gradient, every rank updates the whole block with
 *                     full moments; sharded: each rank updates its slice [lo, hi) with the moments
 *                     of that slice only (1/N of the memory), then the parameters are all-gathered.
 *
 * Both modes give the same bits (same reduced gradient, same norm, AdamW element by element), and
 * at size 1 the two calls are exactly grad_clip + adamw_step. Checkpoints hold the full moments
 * (dp_adamw_full / dp_adamw_gather / dp_adamw_scatter), so sharded and unsharded runs, and runs
 * with another number of ranks, resume each other. */
#pragma once
#include "optim/dist.h"
#include "optim/adamw.h"

typedef struct {
    Dist *dist;
    DistShards shards;
    int sharded;
    size_t lo, hi; /* this rank's slice of the block */
    AdamW opt;     /* moments of the whole block, or of [lo, hi) when sharded */
    float *spare;  /* sharded, between dp_adamw_full and dp_adamw_release: a block for exp_avg_sq */
    float *lent;   /* ... and the caller's block holding exp_avg, zeroed when given back */
} DpAdamW;

void dp_adamw_create(DpAdamW *o, Dist *dist, const ParamTable *table, int sharded);
void dp_adamw_free(DpAdamW *o);

/* After every rank's backward: sum the gradients over ranks (at least this rank's slice of
 * grads; the rest may hold partial sums) and return the global norm and clipping factor. */
GradClip dp_adamw_reduce(DpAdamW *o, float *grads, double max_norm);
/* AdamW with lr and grad_scale (the clipping factor); afterwards every rank holds the same
 * parameters (and, with params16 not NULL, their bf16 copy, as adamw_step_range writes it: sharded,
 * the slices of the other ranks are converted after the all-gather), and grads is all zero, ready
 * for the next step's accumulation (adamw_step zeroes what it reads; sharded, the other slices are
 * zeroed here). */
void dp_adamw_update(DpAdamW *o, const ParamTable *table, float *params, float *grads, bf16 *params16,
                     const OptimConfig *cfg, float lr, float grad_scale);

/* Full-size moments for checkpoint I/O: unsharded, the optimizer's own; sharded, exp_avg in
 * `scratch` (a block-sized buffer the caller lends, e.g. the gradient block between steps) and
 * exp_avg_sq in a block allocated until dp_adamw_release, which gives `scratch` back zeroed, as
 * the gradient block must be between steps. */
AdamW dp_adamw_full(DpAdamW *o, float *scratch);
/* Saving (every rank calls): rank 0's `full` receives every rank's slice of the moments. */
void dp_adamw_gather(DpAdamW *o, AdamW *full);
/* Loading: `full` holds the whole moments read from a checkpoint (the same on every rank);
 * each rank keeps its slice, and the step count. */
void dp_adamw_scatter(DpAdamW *o, const AdamW *full);
void dp_adamw_release(DpAdamW *o);
