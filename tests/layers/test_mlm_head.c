/* layers/mlm_head.c: forward logits against a double reference composed from the formulas
 * (gather, linear, gelu, layernorm, tied output embedding + bias), and every gradient of
 * mlm_head_backward against central differences of that reference's loss sum(w . logits):
 * d_hidden (added into a prefilled buffer, unlabelled rows untouched), d_word_emb, and the
 * head's parameters; parameter gradients accumulate (a second call doubles them). The backward
 * (GELU's slope kept by the forward) equals the composition that recomputes it from pre
 * (linear_forward, gelu_forward; layernorm_backward, gelu_backward, linear_backward) up to
 * rounding, and the forward-only forward gives bit-identical outputs. */
#include <omp.h>

#include "layers/encoder.h"
#include "layers/layers.h"
#include "tests/layer_testing.h"

enum { N = 6, H = 8, V = 11, M = 3 };
static const int ROWS[M] = {4, 0, 2};
static const float EPS = 1e-5f;

/* Every tensor the loss depends on, in double (the finite differences perturb these). */
typedef struct {
    double *hidden, *transform_w, *transform_b, *norm_g, *norm_b, *bias, *word_emb, *w;
} HeadRef;

static double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static double head_ref(const HeadRef *r, double *logits) {
    double loss = 0.0;
    for (int m = 0; m < M; m++) {
        const double *x = r->hidden + ROWS[m] * H;
        double act[H], mean = 0.0, var = 0.0;
        for (int o = 0; o < H; o++) {
            double pre = r->transform_b[o];
            for (int c = 0; c < H; c++)
                pre += x[c] * r->transform_w[o * H + c];
            act[o] = gelu_d(pre);
            mean += act[o] / H;
        }
        for (int o = 0; o < H; o++)
            var += (act[o] - mean) * (act[o] - mean) / H;
        for (int o = 0; o < H; o++)
            act[o] = (act[o] - mean) / sqrt(var + EPS) * r->norm_g[o] + r->norm_b[o];
        for (int v = 0; v < V; v++) {
            double logit = r->bias[v];
            for (int c = 0; c < H; c++)
                logit += act[c] * r->word_emb[v * H + c];
            if (logits)
                logits[m * V + v] = logit;
            loss += r->w[m * V + v] * logit;
        }
    }
    return loss;
}

static double head_loss(const void *ctx) { return head_ref(ctx, NULL); }

/* Head parameters (transform weights in [-w_range, w_range]), zeroed gradients and activations
 * (logits NaN: the forward must write them) for m rows, width h, vocabulary v. */
typedef struct {
    HeadParams p, g;
    HeadActs a;
} HeadSetup;

static HeadSetup head_setup(Pool *pool, Rng *rng, int m, int h, int v, float w_range) {
    return (HeadSetup){
        .p = {uniform(pool, rng, h * h, -w_range, w_range), uniform(pool, rng, h, -0.5f, 0.5f),
              uniform(pool, rng, h, 0.5f, 1.5f), uniform(pool, rng, h, -0.5f, 0.5f),
              uniform(pool, rng, v, -0.5f, 0.5f)},
        .g = {zeros(pool, h * h), zeros(pool, h), zeros(pool, h), zeros(pool, h), zeros(pool, v)},
        .a = {zeros(pool, m * h), zeros(pool, m * h), zeros(pool, m * h), zeros(pool, m * h), zeros(pool, m),
              zeros(pool, m), nans(pool, m * v)}};
}

static void test_mlm_head(TestTally *t, Rng *rng) {
    Pool pool = {0};
    float *hidden = uniform(&pool, rng, N * H, -1, 1), *word_emb = uniform(&pool, rng, V * H, -1, 1);
    HeadSetup setup = head_setup(&pool, rng, M, H, V, 0.5f);
    HeadParams p = setup.p, g = setup.g;
    HeadActs a = setup.a;
    float *w = uniform(&pool, rng, M * V, -1, 1);
    mlm_head_forward(NULL, &a, hidden, ROWS, M, &p, word_emb, H, V, EPS, 0);
    HeadRef r = {doubles(&pool, hidden, N * H), doubles(&pool, p.transform_w, H * H),
                 doubles(&pool, p.transform_b, H), doubles(&pool, p.norm_g, H),
                 doubles(&pool, p.norm_b, H), doubles(&pool, p.bias, V),
                 doubles(&pool, word_emb, V * H), doubles(&pool, w, M * V)};
    double *expected = pool_alloc(&pool, M * V, sizeof *expected);
    head_ref(&r, expected);
    double err = rel_err(a.logits, expected, M * V);
    CHECK(t, err < 1e-5, "mlm_head_forward logits match the reference (rel err %.2e)", err);

    /* d_hidden is added into: prefill it, then compare the increment; row 1 has no label */
    float *prefill = uniform(&pool, rng, N * H, -1, 1), *d_hidden = copy(&pool, prefill, N * H);
    float *d_word_emb = zeros(&pool, V * H), *d_tmp = zeros(&pool, 2 * M * H);
    mlm_head_backward(NULL, d_hidden, &g, d_word_emb, copy(&pool, w, M * V), d_tmp, &a, ROWS, M, &p,
                      word_emb, H, V);
    float *increment = zeros(&pool, N * H);
    int untouched = 1;
    for (int e = 0; e < N * H; e++) {
        increment[e] = d_hidden[e] - prefill[e];
        untouched &= e / H == 1 ? d_hidden[e] == prefill[e] : 1;
    }
    CHECK(t, untouched, "mlm_head d_hidden: rows without a label untouched");
    check_grad(t, &pool, "mlm_head d_hidden (added to the caller's buffer)", increment, r.hidden,
               N * H, head_loss, &r);
    check_grad(t, &pool, "mlm_head d_word_emb", d_word_emb, r.word_emb, V * H, head_loss, &r);
    check_grad(t, &pool, "mlm_head d_transform_w", g.transform_w, r.transform_w, H * H, head_loss, &r);
    check_grad(t, &pool, "mlm_head d_transform_b", g.transform_b, r.transform_b, H, head_loss, &r);
    check_grad(t, &pool, "mlm_head d_norm_g", g.norm_g, r.norm_g, H, head_loss, &r);
    check_grad(t, &pool, "mlm_head d_norm_b", g.norm_b, r.norm_b, H, head_loss, &r);
    check_grad(t, &pool, "mlm_head d_bias", g.bias, r.bias, V, head_loss, &r);

    float *once_w = copy(&pool, g.transform_w, H * H), *once_emb = copy(&pool, d_word_emb, V * H);
    float *once_bias = copy(&pool, g.bias, V);
    mlm_head_backward(NULL, d_hidden, &g, d_word_emb, copy(&pool, w, M * V), d_tmp, &a, ROWS, M, &p,
                      word_emb, H, V);
    err = fmax(doubling_err(&pool, g.transform_w, once_w, H * H),
               fmax(doubling_err(&pool, d_word_emb, once_emb, V * H),
                    doubling_err(&pool, g.bias, once_bias, V)));
    CHECK(t, err < 1e-6, "mlm_head parameter gradients accumulate (rel err %.2e)", err);

    /* forward only: no slope written, every output bit-identical */
    HeadActs f = {zeros(&pool, M * H), nans(&pool, M * H), nans(&pool, M * H), nans(&pool, M * H),
                  nans(&pool, M), nans(&pool, M), nans(&pool, M * V)};
    float *slope_before = copy(&pool, f.slope, M * H);
    mlm_head_forward(NULL, &f, hidden, ROWS, M, &p, word_emb, H, V, EPS, 1);
    CHECK(t, same_bits(f.logits, a.logits, M * V) && same_bits(f.out, a.out, M * H) &&
                 same_bits(f.act, a.act, M * H) && same_bits(f.mean, a.mean, M) &&
                 same_bits(f.rstd, a.rstd, M) && same_bits(f.slope, slope_before, M * H),
          "mlm_head_forward forward only: outputs bit-identical, slope untouched");
    pool_release(&pool);
}

/* The backward against the composition it replaced: pre kept by the forward and GELU's backward
 * recomputing erf and exp from it, the transform's bias gradient in linear_backward. */
static void test_mlm_head_unfused(TestTally *t, Rng *rng) {
    Pool pool = {0};
    enum { UM = 40, UH = 96, UV = 50, UN = 64 }; /* two bias column blocks with 2 threads */
    int rows[UM];
    for (int m = 0; m < UM; m++)
        rows[m] = (m * 37) % UN;
    float *hidden = uniform(&pool, rng, UN * UH, -1, 1), *word_emb = uniform(&pool, rng, UV * UH, -1, 1);
    HeadSetup setup = head_setup(&pool, rng, UM, UH, UV, 0.2f);
    HeadParams p = setup.p, g = setup.g;
    HeadActs a = setup.a;
    float *d_logits = uniform(&pool, rng, UM * UV, -1, 1);
    float *d_hidden = zeros(&pool, UN * UH), *d_word_emb = zeros(&pool, UV * UH);
    mlm_head_forward(NULL, &a, hidden, rows, UM, &p, word_emb, UH, UV, EPS, 0);
    mlm_head_backward(NULL, d_hidden, &g, d_word_emb, copy(&pool, d_logits, UM * UV),
                      zeros(&pool, 2 * UM * UH), &a, rows, UM, &p, word_emb, UH, UV);

    float *pre = nans(&pool, UM * UH), *act = nans(&pool, UM * UH), *d = nans(&pool, UM * UH);
    float *d_gathered = nans(&pool, UM * UH), *d_hidden_ref = zeros(&pool, UN * UH);
    HeadParams gr = {zeros(&pool, UH * UH), zeros(&pool, UH), zeros(&pool, UH), zeros(&pool, UH),
                     zeros(&pool, UV)};
    float *d_word_emb_ref = zeros(&pool, UV * UH);
    linear_forward(NULL, pre, a.gathered, p.transform_w, p.transform_b, UM, UH, UH);
    gelu_forward(act, pre, UM * UH);
    linear_backward(NULL, d, d_word_emb_ref, gr.bias, d_logits, a.out, word_emb, UM, UH, UV);
    layernorm_backward(d, gr.norm_g, gr.norm_b, d, act, p.norm_g, a.mean, a.rstd, UM, UH);
    gelu_backward(d, d, pre, UM * UH);
    linear_backward(NULL, d_gathered, gr.transform_w, gr.transform_b, d, a.gathered, p.transform_w, UM,
                    UH, UH);
    for (int m = 0; m < UM; m++)
        for (int c = 0; c < UH; c++)
            d_hidden_ref[rows[m] * UH + c] += d_gathered[m * UH + c];
    double err = fmax(rel_err(a.act, doubles(&pool, act, UM * UH), UM * UH),
                      rel_err(d_hidden, doubles(&pool, d_hidden_ref, UN * UH), UN * UH));
    err = fmax(err, rel_err(g.transform_w, doubles(&pool, gr.transform_w, UH * UH), UH * UH));
    err = fmax(err, rel_err(g.transform_b, doubles(&pool, gr.transform_b, UH), UH));
    err = fmax(err, rel_err(g.norm_g, doubles(&pool, gr.norm_g, UH), UH));
    err = fmax(err, rel_err(d_word_emb, doubles(&pool, d_word_emb_ref, UV * UH), UV * UH));
    CHECK(t, err < 1e-5, "mlm_head backward from the kept slope = the composition recomputing GELU's "
          "slope from pre (rel err %.2e)", err);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240617);
    omp_set_num_threads(2);
    test_mlm_head(&t, &rng);
    test_mlm_head_unfused(&t, &rng);
    return tally_exit(&t);
}
