/* optim/dist and optim/dp_adamw at whatever size the job has: alone (tests/run.sh) and under
 * `mpirun -np 2` and `-np 3` (tests/train/loop/test_mpi.sh). Every check holds on every rank; rank 0 prints
 * one line per check with the number of ranks where it failed.
 *   - shard layout: covers the block, disjoint, 16-float aligned boundaries;
 *   - the ring reduce-scatter gives, bit for bit, the documented order
 *     ((g_{c+1} + g_{c+2}) + ...) + g_c for slice c, across several 4 MB pieces, and the
 *     all-gather copies it to every rank;
 *   - small sums in rank order, broadcast, gather to rank 0;
 *   - AdamW on slices equals AdamW on the whole block; data-parallel AdamW sharded equals
 *     unsharded (parameters and the gathered moments), and moments scatter back exactly. */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "optim/dist.h"
#include "optim/dp_adamw.h"
#include "tests/check.h"

/* One check over all ranks: rank 0 prints it once. */
static void dcheck(Dist *d, TestTally *t, int ok, const char *what) {
    double bad = !ok;
    dist_sum_doubles(d, &bad, 1);
    if (dist_is_root(d))
        CHECK(t, bad == 0, "%s (%d ranks, failed on %d)", what, d->size, (int)bad);
}

/* Rank r's test gradient: values of mixed magnitude so the summation order shows in the bits.
 * noinline: a rounded float, never fused into the caller's additions by -ffp-contract. */
__attribute__((noinline)) static float grad_value(int rank, size_t e) {
    float u = hash_uniform(hash_key(7, (uint64_t)rank, 1), e) - 0.5f;
    return u * (e % 3 == 0 ? 1e4f : e % 3 == 1 ? 1.0f : 1e-4f);
}

static void check_reduce(Dist *d, TestTally *t, size_t n) {
    int N = d->size;
    DistShards s;
    dist_shards_create(&s, n, N);
    int layout_ok = s.lo[0] == 0 && s.lo[N] == n;
    for (int r = 0; r < N; r++)
        layout_ok &= s.lo[r] <= s.lo[r + 1] && (r == 0 || s.lo[r] % DIST_ALIGN == 0) &&
                     s.counts[r] == (int)(s.lo[r + 1] - s.lo[r]) && s.displs[r] == (int)s.lo[r];
    dcheck(d, t, layout_ok, "shard layout covers the block with aligned, disjoint slices");

    float *block = xalloc_floats(n), *want = xalloc_floats(n);
    for (size_t e = 0; e < n; e++)
        block[e] = grad_value(d->rank, e);
    for (int c = 0; c < N; c++) /* slice c: start at rank c+1, end with rank c */
        for (size_t e = s.lo[c]; e < s.lo[c + 1]; e++) {
            float sum = grad_value((c + 1) % N, e);
            for (int k = 2; k <= N; k++)
                sum = grad_value((c + k) % N, e) + sum;
            want[e] = sum;
        }
    dist_reduce_scatter_sum(d, &s, block);
    size_t lo = s.lo[d->rank], hi = s.lo[d->rank + 1];
    char what[160];
    snprintf(what, sizeof what, "reduce-scatter of %zu floats: own slice bit-equal to the documented ring order", n);
    dcheck(d, t, !memcmp(block + lo, want + lo, sizeof(float) * (hi - lo)), what);
    dist_allgather(d, &s, block);
    snprintf(what, sizeof what, "all-gather of %zu floats: every rank holds the whole sum", n);
    dcheck(d, t, !memcmp(block, want, sizeof(float) * n), what);
    free(block);
    free(want);
    dist_shards_free(&s);
}

static void check_small(Dist *d, TestTally *t) {
    double v[3] = {d->rank + 0.1, 1e16, -1.0 - d->rank};
    dist_sum_doubles(d, v, 3);
    double w[3] = {0, 0, 0};
    for (int r = 0; r < d->size; r++) {
        w[0] += r + 0.1;
        w[1] += 1e16;
        w[2] += -1.0 - r;
    }
    dcheck(d, t, !memcmp(v, w, sizeof v), "dist_sum_doubles adds in rank order, same bits everywhere");

    float b[37];
    for (int i = 0; i < 37; i++)
        b[i] = dist_is_root(d) ? (float)i * 0.5f : -1.0f;
    dist_broadcast(d, b, 37);
    int ok = 1;
    for (int i = 0; i < 37; i++)
        ok &= b[i] == (float)i * 0.5f;
    dcheck(d, t, ok, "dist_broadcast copies rank 0's block");

    DistShards s;
    dist_shards_create(&s, 1000, d->size);
    float *g = xalloc_floats(1000);
    for (size_t e = s.lo[d->rank]; e < s.lo[d->rank + 1]; e++)
        g[e] = (float)e;
    dist_gather_to_root(d, &s, g);
    ok = 1;
    for (int e = 0; e < 1000 && dist_is_root(d); e++)
        ok &= g[e] == (float)e;
    dcheck(d, t, ok, "dist_gather_to_root assembles every slice on rank 0");
    free(g);
    dist_shards_free(&s);
}

/* Three tensors of odd sizes (one without weight decay), padded like a model block. */
static ParamTable test_table(ParamInfo items[3]) {
    size_t counts[3] = {1001, 17, 4099}, offset = 0;
    for (int i = 0; i < 3; i++) {
        memset(&items[i], 0, sizeof items[i]);
        snprintf(items[i].name, PARAM_NAME_MAX, "t%d", i);
        items[i].rows = (int)counts[i];
        items[i].offset = offset;
        items[i].count = counts[i];
        items[i].decay = i != 1;
        offset = (offset + counts[i] + 15) / 16 * 16;
    }
    return (ParamTable){items, 3, offset};
}

static int in_a_tensor(const ParamTable *table, size_t e) {
    for (int i = 0; i < table->count; i++)
        if (e >= table->items[i].offset && e < table->items[i].offset + table->items[i].count)
            return 1;
    return 0;
}

static void check_adamw(Dist *d, TestTally *t) {
    ParamInfo items[3];
    ParamTable table = test_table(items);
    size_t n = table.block_floats;
    OptimConfig cfg = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f,
                       .bias_correction = 1};
    /* AdamW on uneven slices == AdamW on the whole block (no MPI involved). */
    float *p_whole = xalloc_floats(n), *p_parts = xalloc_floats(n), *g = xalloc_floats(n);
    float *g_parts = xalloc_floats(n);
    for (size_t e = 0; e < n; e++)
        p_whole[e] = p_parts[e] = hash_uniform(3, e) - 0.5f;
    AdamW whole, part[3];
    adamw_create(&whole, &table);
    size_t cut[4] = {0, 700, 1030, n};
    for (int i = 0; i < 3; i++)
        adamw_create_floats(&part[i], cut[i + 1] - cut[i]);
    /* the padding after each tensor holds a sentinel: the update must leave it alone */
    const float sentinel = 7.0f;
    int consumed = 1;
    for (int step = 0; step < 3; step++) {
        for (size_t e = 0; e < n; e++)
            g[e] = g_parts[e] = sentinel;
        for (int i = 0; i < 3; i++)
            for (size_t e = items[i].offset; e < items[i].offset + items[i].count; e++)
                g[e] = g_parts[e] = grad_value(step, e);
        adamw_step(&whole, &table, p_whole, g, &cfg, 1e-3f, 0.5f);
        for (int i = 0; i < 3; i++)
            adamw_step_range(&part[i], &table, p_parts, g_parts, &cfg, 1e-3f, 0.5f, cut[i], cut[i + 1], NULL);
        size_t in_tensors = 0;
        for (int i = 0; i < 3; i++)
            for (size_t e = items[i].offset; e < items[i].offset + items[i].count; e++, in_tensors++)
                consumed &= g[e] == 0.0f && g_parts[e] == 0.0f;
        size_t sentinels = 0;
        for (size_t e = 0; e < n; e++)
            sentinels += g[e] == sentinel && g_parts[e] == sentinel;
        consumed &= sentinels == n - in_tensors;
    }
    dcheck(d, t, consumed, "adamw_step and adamw_step_range leave every gradient they read at 0, and the padding "
                           "between tensors as it was");
    int same = !memcmp(p_whole, p_parts, sizeof(float) * n);
    for (int i = 0; i < 3; i++)
        same &= !memcmp(part[i].exp_avg_sq, whole.exp_avg_sq + cut[i], sizeof(float) * (cut[i + 1] - cut[i]));
    dcheck(d, t, same, "adamw_step_range over three slices equals adamw_step on the block");
    free(g_parts);
    adamw_free(&whole);
    for (int i = 0; i < 3; i++)
        adamw_free(&part[i]);

    /* Data-parallel AdamW, sharded vs unsharded, 3 steps with clipping. */
    DpAdamW plain, shard;
    dp_adamw_create(&plain, d, &table, 0);
    dp_adamw_create(&shard, d, &table, 1);
    float *g2 = xalloc_floats(n);
    for (size_t e = 0; e < n; e++)
        p_whole[e] = p_parts[e] = hash_uniform(3, e) - 0.5f;
    double norm_a = 0, norm_b = 0;
    int zeroed = 1;
    for (int step = 0; step < 3; step++) {
        for (size_t e = 0; e < n; e++) /* zero in the padding, as a model's backward leaves it */
            g[e] = g2[e] = in_a_tensor(&table, e) ? grad_value(d->rank + 10 * step, e) * 1e-3f : 0.0f;
        GradClip ca = dp_adamw_reduce(&plain, g, 1.0), cb = dp_adamw_reduce(&shard, g2, 1.0);
        norm_a = ca.norm;
        norm_b = cb.norm;
        dp_adamw_update(&plain, &table, p_whole, g, NULL, &cfg, 1e-3f, ca.scale);
        dp_adamw_update(&shard, &table, p_parts, g2, NULL, &cfg, 1e-3f, cb.scale);
        for (size_t e = 0; e < n; e++)
            zeroed &= g[e] == 0.0f && g2[e] == 0.0f;
    }
    dcheck(d, t, zeroed, "dp_adamw_update leaves the whole gradient block zero, sharded (the other ranks' slices "
                         "too) and unsharded");
    dcheck(d, t, norm_a == norm_b && norm_a > 1.0, "sharded and unsharded see the same global norm (clipping on)");
    dcheck(d, t, !memcmp(p_whole, p_parts, sizeof(float) * n), "ZeRO-1 parameters equal unsharded bit for bit");
    AdamW full_plain = dp_adamw_full(&plain, NULL), full_shard = dp_adamw_full(&shard, g2);
    dp_adamw_gather(&plain, &full_plain);
    dp_adamw_gather(&shard, &full_shard);
    int moments = full_shard.step == 3 && full_plain.step == 3;
    if (dist_is_root(d))
        moments &= !memcmp(full_plain.exp_avg, full_shard.exp_avg, sizeof(float) * n) &&
                   !memcmp(full_plain.exp_avg_sq, full_shard.exp_avg_sq, sizeof(float) * n);
    dcheck(d, t, moments, "gathered ZeRO-1 moments equal the unsharded moments");
    dist_broadcast(d, full_shard.exp_avg, n); /* as if every rank had read the checkpoint */
    dist_broadcast(d, full_shard.exp_avg_sq, n);
    DpAdamW again;
    dp_adamw_create(&again, d, &table, 1);
    dp_adamw_scatter(&again, &full_shard);
    size_t count = again.hi - again.lo;
    dcheck(d, t, again.opt.step == 3 && !memcmp(again.opt.exp_avg, plain.opt.exp_avg + again.lo,
                                                 sizeof(float) * count) &&
                     !memcmp(again.opt.exp_avg_sq, plain.opt.exp_avg_sq + again.lo, sizeof(float) * count),
           "scattered full moments give each rank its slice");
    dp_adamw_free(&again);
    dp_adamw_free(&plain);
    int held_moments = 0; /* g2 holds the gathered exp_avg until the release gives it back */
    for (size_t e = 0; e < n; e++)
        held_moments |= g2[e] != 0.0f;
    dp_adamw_release(&shard);
    int given_back_zero = 1;
    for (size_t e = 0; e < n; e++)
        given_back_zero &= g2[e] == 0.0f;
    dcheck(d, t, held_moments && given_back_zero,
           "the block lent to dp_adamw_full (the gradient block) comes back zeroed from dp_adamw_release");
    dp_adamw_free(&shard);
    free(p_whole);
    free(p_parts);
    free(g);
    free(g2);
}

int main(int argc, char **argv) {
    Dist d;
    dist_init(&d, &argc, &argv);
    TestTally t = {0, 0};
    check_small(&d, &t);
    check_reduce(&d, &t, 1003);
    check_reduce(&d, &t, (size_t)5 * DIST_PIECE / 2 + 77);
    check_adamw(&d, &t);
    int rc = dist_is_root(&d) ? tally_exit(&t) : 0;
    dist_finalize(&d);
    return rc;
}
