/* The loss API (train/model/loss.h) and the shared training step (train/loop/step.h):
 *  - for every head (MLM, classification, regression, span) loss_backward with loss_scale s
 *    accumulates exactly s times the gradient of loss_scale 1;
 *  - train_step, as training runs it (data-parallel AdamW over a one-rank job), with
 *    grad_accum_steps = 3 asks the batch source for micro-batches 0, 1, 2 of the step, and leaves
 *    exactly (bit for bit) the parameters of one AdamW update by hand from
 *    clip(sum_micro d(loss / 3)), dropout keyed by (seed, step, micro), at the schedule's rate;
 *  - the precision's one owner (activations_create): in bf16 it lays out the weights' copy
 *    (= bf16(params)) and GELU's output and gradient in bf16 only, none of them in fp32; the step
 *    hands the copy to AdamW, so after a step it is bf16 of the new weights, and
 *    activations_refresh_weights rebuilds it after the weights were written otherwise;
 *  - a training step, fp32 or bf16, opens no parallel region inside another: each such region is a
 *    team of one with a futex wake at its end (issue 50: gemm_convert_in_place's rows opened one per
 *    512-float chunk, 38040 a bf16 bert-mini step, 1.16x its CPU time). Counted by wrapping
 *    GOMP_parallel (this test links with -Wl,--wrap=GOMP_parallel, Makefile). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/loop/step.h"
#include "tests/check.h"

enum { B = 2, L = 6, V = 30, ACCUM = 3 };

/* GOMP_parallel (a `#pragma omp parallel` of the library) opened at nesting level > 0 */
static long nested_regions;
void __real_GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
void __wrap_GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
void __wrap_GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags) {
    if (omp_get_level() > 0) {
#pragma omp atomic
        nested_regions++;
    }
    __real_GOMP_parallel(fn, data, threads, flags);
}

static int ids[B * L], types[B * L], mask[B * L], mlm_labels[B * L];
static int labels[B] = {1, 0}, start[B] = {1, 2}, end[B] = {3, 4};
static float values[B] = {0.3f, -0.7f};

static void make_model(Model *m, ModelHeads heads) {
    ModelConfig c = {.hidden_size = 8, .num_layers = 1, .num_heads = 2, .intermediate_size = 16, .vocab_size = V,
                     .max_position = 16, .type_vocab_size = 2, .absolute_position = 1, .norm = NORM_POST,
                     .hidden_dropout = 0.1f, .attention_dropout = 0.1f, .layer_norm_eps = 1e-12f,
                     .init_range = 0.2f, .seed = 3, .relative_position = REL_NONE};
    model_create(m, &c, heads);
    model_init_weights(m, 9);
}

static TrainBatch make_batch(void) {
    Rng rng;
    rng_seed(&rng, 4);
    for (int n = 0; n < B * L; n++) {
        ids[n] = 5 + (int)rng_below(&rng, V - 5);
        types[n] = n % L >= 3;
        mask[n] = n % L < L - (n / L);
        mlm_labels[n] = n % 3 == 1 ? (int)rng_below(&rng, V) : IGNORE_LABEL;
    }
    return (TrainBatch){{B, L, ids, types, mask, mlm_labels, NULL}, {labels, values, start, end, NULL}, 0};
}

static double max_scaled_diff(const float *a, const float *b, float scale, size_t n) {
    double worst = 0, size = 1e-30;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - scale * (double)b[i]));
        size = fmax(size, fabs((double)b[i]));
    }
    return worst / size;
}

static void check_scale(TestTally *t, const char *name, ModelHeads heads, int regression) {
    Model m;
    make_model(&m, heads);
    Activations a;
    activations_create(&a, &m, B, L, B * L, PRECISION_FP32);
    HeadBuffers hb;
    memset(&hb, 0, sizeof hb);
    if (!heads.mlm)
        head_buffers_create(&hb, &m, B, L);
    LossHead h = heads.mlm ? loss_head_mlm(&a) : loss_head_task(&m, &a, &hb, regression);
    TrainBatch tb = make_batch();
    size_t n = m.table.block_floats;
    float *g1 = xalloc_floats(n);
    loss_forward(&m, &h, &tb, FORWARD_TRAIN, 17);
    loss_backward(&m, &h, &tb, 1.0f);
    memcpy(g1, m.grads, sizeof(float) * n);
    memset(m.grads, 0, sizeof(float) * n);
    ForwardStats st = loss_forward(&m, &h, &tb, FORWARD_TRAIN, 17);
    loss_backward(&m, &h, &tb, 0.25f);
    double d = max_scaled_diff(m.grads, g1, 0.25f, n);
    CHECK(t, d < 1e-6 && isfinite(st.loss) && st.loss > 0,
          "%s: loss_backward(loss_scale 0.25) = 0.25 x the gradient of loss_scale 1 (rel diff %.1e, loss %.4f)", name,
          d, st.loss);
    free(g1);
    if (!heads.mlm)
        head_buffers_free(&hb);
    activations_free(&a);
    model_free(&m);
}

typedef struct {
    TrainBatch batch;
    int calls, micro_seen[16];
    long step_seen[16];
} CountingSource;

static void counting_next(void *ctx, long step, int micro, TrainBatch *out) {
    CountingSource *s = ctx;
    if (s->calls < 16) {
        s->micro_seen[s->calls] = micro;
        s->step_seen[s->calls] = step;
    }
    s->calls++;
    *out = s->batch;
    out->num_tokens = 7;
}

static void check_step(TestTally *t) {
    Model m, ref;
    ModelHeads heads = {0, 1, 2, 0};
    make_model(&m, heads);
    make_model(&ref, heads);
    Activations a;
    activations_create(&a, &m, B, L, 0, PRECISION_FP32);
    HeadBuffers hb;
    head_buffers_create(&hb, &m, B, L);
    Dist dist;
    dist_init(&dist, NULL, NULL); /* not under a launcher: one rank */
    CountingSource src = {make_batch(), 0, {0}, {0}};
    size_t n = m.table.block_floats;
    OptimConfig oc = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    const float clip_norm = 0.05f; /* small enough to clip */
    StepConfig sc = {SCHED_LINEAR, 1e-3f, 1, 4, ACCUM, clip_norm, 5, 1000, NULL};
    TrainStep ts;
    train_step_init(&ts, &sc, &m, loss_head_task(&m, &a, &hb, 0), (BatchSource){counting_next, NULL, &src}, &oc,
                    &dist, 0);
    train_step_begin(&ts, NULL, 0);
    train_step(&ts, 1);
    CHECK(t, src.calls == ACCUM && src.micro_seen[0] == 0 && src.micro_seen[1] == 1 && src.micro_seen[2] == 2 &&
                 src.step_seen[0] == 1 && src.step_seen[2] == 1,
          "one step asks the source for micro-batches 0, 1, 2 of that step (%d calls)", src.calls);
    /* the same step by hand: the three micro-batches through the loss API, clipping, one AdamW update */
    Activations ra;
    activations_create(&ra, &ref, B, L, 0, PRECISION_FP32);
    HeadBuffers rhb;
    head_buffers_create(&rhb, &ref, B, L);
    LossHead rh = loss_head_task(&ref, &ra, &rhb, 0);
    for (int micro = 0; micro < ACCUM; micro++) {
        loss_forward(&ref, &rh, &src.batch, FORWARD_TRAIN, hash_key(5, 1, (uint64_t)micro));
        loss_backward(&ref, &rh, &src.batch, 1.0f / ACCUM);
    }
    GradClip clip = grad_clip(ref.grads, n, clip_norm);
    AdamW plain;
    adamw_create(&plain, &ref.table);
    adamw_step(&plain, &ref.table, ref.params, ref.grads, &oc, lr_schedule(SCHED_LINEAR, 1e-3f, 1, 1, 4), clip.scale);
    CHECK(t, clip.scale < 1.0f && !memcmp(ref.params, m.params, sizeof(float) * n),
          "the step's parameters are bit for bit one AdamW update of clip(sum over micro-batches of d(loss / %d)) "
          "at the scheduled rate (clip scale %.3f)", ACCUM, (double)clip.scale);
    CHECK(t, !memcmp(plain.exp_avg, ts.opt.opt.exp_avg, sizeof(float) * n) && plain.step == ts.opt.opt.step,
          "... and the same moments (step %lld)", (long long)ts.opt.opt.step);
    /* A second step: train_step does not zero the gradient block itself (the update left it zero);
     * by hand it is zeroed explicitly. */
    nested_regions = 0;
    train_step(&ts, 2);
    CHECK(t, nested_regions == 0, "an fp32 training step opens no parallel region inside another (%ld did)",
          nested_regions);
    memset(ref.grads, 0, sizeof(float) * n);
    for (int micro = 0; micro < ACCUM; micro++) {
        loss_forward(&ref, &rh, &src.batch, FORWARD_TRAIN, hash_key(5, 2, (uint64_t)micro));
        loss_backward(&ref, &rh, &src.batch, 1.0f / ACCUM);
    }
    clip = grad_clip(ref.grads, n, clip_norm);
    adamw_step(&plain, &ref.table, ref.params, ref.grads, &oc, lr_schedule(SCHED_LINEAR, 1e-3f, 2, 1, 4), clip.scale);
    CHECK(t, !memcmp(ref.params, m.params, sizeof(float) * n),
          "a second step's parameters are bit for bit the update from freshly zeroed gradients");
    adamw_free(&plain);
    head_buffers_free(&rhb);
    activations_free(&ra);
    head_buffers_free(&hb);
    activations_free(&a);
    train_step_free(&ts);
    dist_finalize(&dist);
    model_free(&m);
    model_free(&ref);
}

/* a16[e] == bf16(params[e]) for every e < n */
static int is_copy(const bf16 *a16, const float *params, size_t n) {
    for (size_t e = 0; e < n; e++)
        if (a16[e] != bf16_from_float(params[e]))
            return 0;
    return 1;
}

/* 1 when every layer holds Q|K|V and ctx in bf16 only (bf16 = 1) or in fp32 only (bf16 = 0) */
static int qkv_in(const Activations *a, int layers, int bf16) {
    for (int l = 0; l < layers; l++)
        if ((a->layer[l].qkv == NULL) != bf16 || (a->layer[l].qkv16 == NULL) == bf16 ||
            (a->layer[l].ctx == NULL) != bf16 || (a->layer[l].ctx16 == NULL) == bf16)
            return 0;
    return 1;
}

static void check_precision_owner(TestTally *t) {
    setenv("REALPOS_BF16_EMULATE", "1", 1); /* the emulated bf16 products: any host */
    Model m;
    make_model(&m, heads_mlm());
    const size_t n = m.table.block_floats;
    Activations a;
    activations_create(&a, &m, B, L, B * L, PRECISION_FP32);
    CHECK(t, qkv_in(&a, m.cfg.num_layers, 0), "fp32 activations: every layer's Q|K|V and ctx in fp32 only");
    CHECK(t, !a.weights16 && a.layer[0].ffn_act && a.layer[0].ffn_slope && !a.layer[0].ffn_act16 &&
                 !a.layer[0].ffn_slope16 && !a.scratch.d_ffn16,
          "fp32 activations: no weights' copy, GELU's output and slope in fp32, no bf16 buffers");
    activations_free(&a);
    activations_create(&a, &m, B, L, B * L, PRECISION_BF16);
    CHECK(t, qkv_in(&a, m.cfg.num_layers, 1), "bf16 activations: every layer's Q|K|V and ctx in bf16 only (no fp32 block)");
    CHECK(t, a.weights16 && is_copy(a.weights16, m.params, n) && !a.layer[0].ffn_act && a.layer[0].ffn_act16 &&
                 !a.layer[0].ffn_slope && a.layer[0].ffn_slope16 && a.scratch.d_ffn16 &&
                 gemm_precision(a.gemm) == PRECISION_BF16,
          "bf16 activations: the weights' copy = bf16(params), GELU's output, slope and gradient in bf16 only, a "
          "bf16 product context");
    Dist dist;
    dist_init(&dist, NULL, NULL);
    TrainBatch tb = make_batch();
    OptimConfig oc = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    StepConfig sc = {SCHED_CONSTANT, 1e-2f, 0, 2, 1, 0.0f, 5, 1000, NULL};
    float *before = xmalloc(sizeof(float) * n);
    memcpy(before, m.params, sizeof(float) * n);
    TrainStep ts;
    train_step_init(&ts, &sc, &m, loss_head_mlm(&a), batch_source_repeat(&tb), &oc, &dist, 0);
    train_step_begin(&ts, NULL, 0);
    nested_regions = 0;
    train_step(&ts, 0);
    CHECK(t, nested_regions == 0, "a bf16 training step opens no parallel region inside another (%ld did)",
          nested_regions);
    CHECK(t, memcmp(before, m.params, sizeof(float) * n) && is_copy(a.weights16, m.params, n),
          "after a bf16 training step the weights' copy is bf16 of the updated weights (the step hands it to AdamW)");
    for (size_t e = 0; e < n; e++)
        m.params[e] *= 0.5f;
    activations_refresh_weights(&a, &m);
    CHECK(t, is_copy(a.weights16, m.params, n), "activations_refresh_weights: the copy follows weights written "
          "otherwise (a checkpoint load)");
    free(before);
    train_step_free(&ts);
    dist_finalize(&dist);
    activations_free(&a);
    model_free(&m);
    unsetenv("REALPOS_BF16_EMULATE");
}

int main(void) {
    TestTally t = {0, 0};
    check_scale(&t, "MLM", heads_mlm(), 0);
    check_scale(&t, "classification", (ModelHeads){0, 1, 3, 0}, 0);
    check_scale(&t, "regression", (ModelHeads){0, 1, 1, 0}, 1);
    check_scale(&t, "span", (ModelHeads){0, 0, 0, 1}, 0);
    check_step(&t);
    check_precision_owner(&t);
    return tally_exit(&t);
}
