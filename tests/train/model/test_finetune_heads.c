/* Gradient check of the fine-tuning heads composed on the encoder (train/task_heads.c): pooler +
 * dropout + classifier with cross-entropy, the same with MSE (regression), and the span head, on a
 * tiny model. The analytic gradient (head_backward + model_encode_backward) of a few entries of
 * each head parameter and of encoder parameters is compared with central differences of the float
 * loss at two step sizes (dropout on: its masks are a pure function of the key). Also tanh, and
 * the token classification head (tagging: dropout + classifier on every position, labels on some
 * positions, IGNORE_LABEL on the others and on the padding). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/model/task_heads.h"
#include "tests/check.h"

enum { B = 3, L = 7, V = 40 };

typedef struct {
    Model m;
    Activations a;
    HeadBuffers hb;
    Batch batch;
    HeadTargets targets;
    int regression;
} Fixture;

static float loss_of(Fixture *fx) {
    const float *h = model_encode(&fx->m, &fx->a, &fx->batch, FORWARD_TRAIN, 77);
    head_forward(&fx->m, &fx->hb, h, &fx->batch, 1, 77);
    return head_loss(&fx->hb, &fx->targets, fx->regression, NULL);
}

/* Finite-difference check of `entries` entries: the error |analytic - numeric| over what is
 * allowed, tol * max |numeric| + noise, for the better of two steps (pass: <= 1). noise bounds what
 * rounding alone puts into a central difference of the float loss, 16 ulps of |loss| over 2 step:
 * a zero gradient (the span bias: adding a constant to every start logit leaves the softmax
 * unchanged) is then judged against an absolute bound, the same on every instruction set. */
static double check_param(Fixture *fx, const float *param, const float *grad, size_t count, int entries,
                          double tol) {
    const float steps[2] = {1e-2f, 2e-3f};
    const double loss = fmax(fabs((double)loss_of(fx)), 1.0);
    double best = INFINITY;
    for (int s = 0; s < 2; s++) {
        double worst = 0, scale = 0;
        for (int k = 0; k < entries; k++) {
            size_t e = (size_t)k * 7919 % count;
            float *w = (float *)param + e, keep = *w;
            *w = keep + steps[s];
            double up = loss_of(fx);
            *w = keep - steps[s];
            double down = loss_of(fx);
            *w = keep;
            double numeric = (up - down) / (2.0 * steps[s]);
            worst = fmax(worst, fabs(numeric - grad[e]));
            scale = fmax(scale, fabs(numeric));
        }
        double noise = 16.0 * FLT_EPSILON * loss / (2.0 * steps[s]);
        best = fmin(best, worst / (tol * scale + noise));
    }
    return best;
}

static void setup(Fixture *fx, ModelHeads heads, int regression) {
    ModelConfig c = {.hidden_size = 16, .num_layers = 2, .num_heads = 2, .intermediate_size = 32,
                     .vocab_size = V, .max_position = 16, .type_vocab_size = 2, .absolute_position = 1,
                     .norm = NORM_POST, .hidden_dropout = 0.1f, .attention_dropout = 0.1f,
                     .layer_norm_eps = 1e-12f, .init_range = 0.3f, .seed = 5,
                     .relative_position = REL_METHOD4, .relative_k = 3};
    memset(fx, 0, sizeof *fx);
    model_create(&fx->m, &c, heads);
    model_init_weights(&fx->m, 11);
    activations_create(&fx->a, &fx->m, B, L, 0, PRECISION_FP32);
    head_buffers_create(&fx->hb, &fx->m, B, L);
    fx->regression = regression;
    static int ids[B * L], types[B * L], mask[B * L], labels[B] = {0, 2, 1}, start[B] = {2, 0, 4},
                                                      end[B] = {3, 0, 6};
    static float values[B] = {0.5f, -1.0f, 2.0f};
    static int token_labels[B * L];
    Rng rng;
    rng_seed(&rng, 3);
    for (int n = 0; n < B * L; n++) {
        ids[n] = (int)rng_below(&rng, V);
        types[n] = n % L >= 4;
        mask[n] = !(n / L == 1 && n % L == L - 1); /* one padded position */
        token_labels[n] = mask[n] && n % 3 != 0 ? (int)rng_below(&rng, 4) : IGNORE_LABEL;
    }
    fx->batch = (Batch){B, L, ids, types, mask, NULL, NULL};
    fx->targets = (HeadTargets){labels, values, start, end, token_labels};
}

static void teardown(Fixture *fx) {
    head_buffers_free(&fx->hb);
    activations_free(&fx->a);
    model_free(&fx->m);
}

static void backward(Fixture *fx) {
    memset(fx->m.grads, 0, sizeof(float) * fx->m.table.block_floats);
    loss_of(fx);
    const float *h = fx->a.encoder_out;
    head_backward(&fx->m, &fx->hb, h, &fx->targets, fx->regression, 1.0f, fx->a.d_hidden_a);
    model_encode_backward(&fx->m, &fx->a, &fx->batch);
}

static void check_model(TestTally *t, const char *what, ModelHeads heads, int regression) {
    Fixture fx;
    setup(&fx, heads, regression);
    backward(&fx);
    const ModelParams *p = &fx.m.p, *g = &fx.m.g;
    const double tol = 1e-2;
    struct {
        const char *name;
        const float *param, *grad;
        size_t count;
    } items[] = {
        {"pooler weight", p->pooler_w, g->pooler_w, 16 * 16},   {"pooler bias", p->pooler_b, g->pooler_b, 16},
        {"classifier weight", p->classifier_w, g->classifier_w, (size_t)heads.num_labels * 16},
        {"classifier bias", p->classifier_b, g->classifier_b, (size_t)heads.num_labels},
        {"span weight", p->span_w, g->span_w, 2 * 16},          {"span bias", p->span_b, g->span_b, 2},
        {"layer 0 query weight", p->layer[0].qkv_w, g->layer[0].qkv_w, 16 * 16},
        {"layer 1 ffn output weight", p->layer[1].ffn_out_w, g->layer[1].ffn_out_w, 16 * 32},
        {"word embeddings", p->word_emb, g->word_emb, (size_t)V * 16},
    };
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        if (!items[i].param)
            continue;
        double ratio = check_param(&fx, items[i].param, items[i].grad, items[i].count, 12, tol);
        CHECK(t, ratio <= 1.0, "%s: d loss / d %s matches finite differences (error / allowed %.2f)", what,
              items[i].name, ratio);
    }
    teardown(&fx);
}

static void check_tanh(TestTally *t) {
    enum { n = 9 };
    float x[n], y[n], d_out[n], d_in[n];
    for (int i = 0; i < n; i++) {
        x[i] = -2.0f + 0.5f * i;
        d_out[i] = 0.3f * i - 1.0f;
    }
    tanh_forward(y, x, n);
    tanh_backward(d_in, d_out, y, n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double numeric = (tanh((double)x[i] + 1e-6) - tanh((double)x[i] - 1e-6)) / 2e-6 * d_out[i];
        worst = fmax(worst, fabs(numeric - d_in[i]) + fabs(tanh((double)x[i]) - y[i]));
    }
    CHECK(t, worst < 1e-5, "tanh forward and backward (max err %.2e)", worst);
}

int main(void) {
    TestTally t = {0, 0};
    check_tanh(&t);
    check_model(&t, "classification (3 labels)", (ModelHeads){0, 1, 3, 0}, 0);
    check_model(&t, "regression (MSE)", (ModelHeads){0, 1, 1, 0}, 1);
    check_model(&t, "span head", (ModelHeads){0, 0, 0, 1}, 0);
    check_model(&t, "token classification (4 labels, no pooler)", (ModelHeads){0, 0, 4, 0}, 0);
    return tally_exit(&t);
}
