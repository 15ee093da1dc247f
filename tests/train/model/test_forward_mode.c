/* ForwardMode (train/model/model.h) on a tiny MLM model with dropout configured, Post-LN and
 * Pre-LN: the forward-only forward (FORWARD_EVAL, which skips GELU's slopes) gives the logits,
 * loss and encoder output of the forward kept for a backward without dropout (FORWARD_EVAL_GRAD)
 * bit for bit; a backward after FORWARD_EVAL is refused (exit status 1 and the message), one
 * after FORWARD_EVAL_GRAD runs. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/model/model.h"
#include "tests/check.h"
#include "tests/child.h"

enum { B = 2, L = 7, V = 30, H = 16, N = B * L };

typedef struct {
    Model m;
    Activations a;
    int ids[N], types[N], mask[N], labels[N];
    Batch batch;
} Fixture;

static void fixture_create(Fixture *f, NormKind norm) {
    ModelConfig c = {.hidden_size = H, .num_layers = 2, .num_heads = 2, .intermediate_size = 40,
                     .vocab_size = V, .max_position = 16, .type_vocab_size = 2, .absolute_position = 1,
                     .norm = norm, .layer_norm_eps = 1e-12f, .init_range = 0.3f, .seed = 5,
                     .hidden_dropout = 0.1f, .attention_dropout = 0.1f,
                     .relative_position = REL_METHOD4, .relative_k = 3, .residual_attention = 1};
    model_create(&f->m, &c, heads_mlm());
    model_init_weights(&f->m, 11);
    activations_create(&f->a, &f->m, B, L, N, PRECISION_FP32);
    Rng rng;
    rng_seed(&rng, 3);
    for (int n = 0; n < N; n++) {
        f->ids[n] = (int)rng_below(&rng, V);
        f->types[n] = n % L >= 4;
        f->mask[n] = !(n / L == 1 && n % L >= L - 2);
        f->labels[n] = n % 3 == 0 ? (int)rng_below(&rng, V) : IGNORE_LABEL;
    }
    f->batch = (Batch){B, L, f->ids, f->types, f->mask, f->labels, NULL};
}

static void fixture_free(Fixture *f) {
    activations_free(&f->a);
    model_free(&f->m);
}

static int same_bits(const float *x, const float *y, size_t n) { return memcmp(x, y, n * sizeof *x) == 0; }

/* Build the model, run FORWARD_EVAL then model_mlm_backward (in a child: tests/child.h). */
static void backward_after_eval(const void *arg) {
    Fixture f;
    fixture_create(&f, *(const NormKind *)arg);
    model_mlm_forward(&f.m, &f.a, &f.batch, FORWARD_EVAL, 0, NULL);
    model_mlm_backward(&f.m, &f.a, &f.batch, 1.0f);
}

/* PASS if that exits 1 with the refusal's message. */
static void expect_backward_refused(TestTally *t, NormKind norm) {
    ChildResult r = child_run(backward_after_eval, &norm);
    char why[1400];
    CHECK(t, child_refused(&r, "model_mlm_backward after a FORWARD_EVAL forward", why, sizeof why),
          "%s: a backward after FORWARD_EVAL is refused%s", norm == NORM_PRE ? "pre-LN" : "post-LN", why);
}

static void test_modes(TestTally *t, NormKind norm) {
    const char *what = norm == NORM_PRE ? "pre-LN" : "post-LN";
    Fixture f;
    fixture_create(&f, norm);
    int M = 0;
    for (int n = 0; n < N; n++)
        M += f.labels[n] != IGNORE_LABEL;
    float *logits[2] = {xalloc_floats((size_t)M * V), xalloc_floats((size_t)M * V)};
    float *hidden[2] = {xalloc_floats((size_t)N * H), xalloc_floats((size_t)N * H)};
    ForwardStats st[2];
    const ForwardMode modes[2] = {FORWARD_EVAL_GRAD, FORWARD_EVAL};
    for (int k = 0; k < 2; k++) {
        st[k] = model_mlm_forward(&f.m, &f.a, &f.batch, modes[k], 0, logits[k]);
        memcpy(hidden[k], f.a.encoder_out, sizeof(float) * N * H);
    }
    CHECK(t, same_bits(logits[0], logits[1], (size_t)M * V) && same_bits(hidden[0], hidden[1], N * H) &&
                 memcmp(&st[0].loss, &st[1].loss, sizeof st[0].loss) == 0 &&
                 st[0].num_correct == st[1].num_correct,
          "%s: FORWARD_EVAL gives FORWARD_EVAL_GRAD's logits, loss and encoder output bit for bit "
          "(%d predictions)", what, M);
    model_mlm_forward(&f.m, &f.a, &f.batch, FORWARD_EVAL_GRAD, 0, NULL);
    model_mlm_backward(&f.m, &f.a, &f.batch, 1.0f);
    double norm2 = 0.0;
    for (size_t e = 0; e < f.m.table.block_floats; e++)
        norm2 += (double)f.m.grads[e] * f.m.grads[e];
    CHECK(t, isfinite(norm2) && norm2 > 0.0, "%s: a backward after FORWARD_EVAL_GRAD runs (|grad|^2 %.3g)",
          what, norm2);
    for (int k = 0; k < 2; k++)
        free(logits[k]), free(hidden[k]);
    fixture_free(&f);
}

int main(void) {
    TestTally t = {0};
    omp_set_num_threads(2);
    expect_backward_refused(&t, NORM_POST);
    expect_backward_refused(&t, NORM_PRE);
    test_modes(&t, NORM_POST);
    test_modes(&t, NORM_PRE);
    return tally_exit(&t);
}
