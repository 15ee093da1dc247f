/* The attention scratch is laid out by activations_create for the thread count of that moment;
 * raising the thread count afterwards must not let more threads index work buffers that were
 * never laid out (they would overwrite the residual `carried` scores next to the scratch). The
 * encoder output and gradients with the count raised to 4 after the layout must equal those of a
 * layout and run at one thread (method4 + residual attention, whose carried buffer follows the
 * scratch). And t5, whose one table every layer's backward adds into: its gradient summed over
 * the layers has the same bits at 1 and 2 threads (as every other gradient). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "train/model/model.h"
#include "tests/check.h"

enum { B = 3, L = 9, V = 30, H = 16 };

typedef struct {
    float *out, *grads;
    size_t num_grads;
} Result;

/* Lay out at `layout_threads`, run forward + encoder backward at `run_threads`. */
static Result run(RelKind rel, int layout_threads, int run_threads) {
    ModelConfig c = {.hidden_size = H, .num_layers = 3, .num_heads = 2, .intermediate_size = 32,
                     .vocab_size = V, .max_position = 16, .type_vocab_size = 2, .absolute_position = 1,
                     .norm = NORM_POST, .layer_norm_eps = 1e-12f, .init_range = 0.3f, .seed = 5,
                     .relative_position = rel, .relative_k = 3, .residual_attention = 1,
                     .t5_num_buckets = 8, .t5_max_distance = 6, .rope_theta = 10000.0f};
    Model m;
    Activations a;
    model_create(&m, &c, (ModelHeads){0});
    model_init_weights(&m, 11);
    omp_set_num_threads(layout_threads);
    activations_create(&a, &m, B, L, 0, PRECISION_FP32);
    omp_set_num_threads(run_threads);
    int ids[B * L], types[B * L], mask[B * L];
    Rng rng;
    rng_seed(&rng, 3);
    for (int n = 0; n < B * L; n++) {
        ids[n] = (int)rng_below(&rng, V);
        types[n] = n % L >= 4;
        mask[n] = !(n / L == 1 && n % L >= L - 2);
    }
    Batch batch = {B, L, ids, types, mask, NULL, NULL};
    Result r = {xalloc_floats((size_t)B * L * H), xalloc_floats(m.table.block_floats), m.table.block_floats};
    memcpy(r.out, model_encode(&m, &a, &batch, FORWARD_EVAL_GRAD, 1), sizeof(float) * B * L * H);
    for (size_t e = 0; e < (size_t)B * L * H; e++)
        a.d_hidden_a[e] = 0.01f * (float)(e % 13) - 0.05f;
    model_encode_backward(&m, &a, &batch);
    memcpy(r.grads, m.grads, sizeof(float) * m.table.block_floats);
    activations_free(&a);
    model_free(&m);
    return r;
}

static double max_diff(const float *x, const float *y, size_t n) {
    double worst = 0.0;
    for (size_t e = 0; e < n; e++)
        worst = isfinite(x[e]) && isfinite(y[e]) ? fmax(worst, fabs((double)x[e] - y[e])) : INFINITY;
    return worst;
}

int main(void) {
    TestTally t = {0};
    Result ref = run(REL_METHOD4, 1, 1), raised = run(REL_METHOD4, 1, 4);
    double d_out = max_diff(ref.out, raised.out, (size_t)B * L * H);
    double d_grad = max_diff(ref.grads, raised.grads, ref.num_grads);
    CHECK(&t, d_out < 1e-5, "threads raised 1 -> 4 after activations_create: encoder output unchanged "
          "(max diff %.3g)", d_out);
    CHECK(&t, d_grad < 1e-5, "threads raised 1 -> 4 after activations_create: gradients unchanged "
          "(max diff %.3g)", d_grad);
    free(ref.out), free(ref.grads), free(raised.out), free(raised.grads);
    Result t5_one = run(REL_T5, 1, 1), t5_two = run(REL_T5, 2, 2);
    CHECK(&t, !memcmp(t5_one.grads, t5_two.grads, sizeof(float) * t5_one.num_grads) &&
                  !memcmp(t5_one.out, t5_two.out, sizeof(float) * B * L * H),
          "t5: encoder output and every gradient (the shared table's summed over 3 layers too) "
          "bit-identical at 1 and 2 threads");
    free(t5_one.out), free(t5_one.grads), free(t5_two.out), free(t5_two.grads);
    return tally_exit(&t);
}
