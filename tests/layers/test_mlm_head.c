/* layers/mlm_head.c: forward logits against a double reference composed from the formulas
 * (gather, linear, gelu, layernorm, tied output embedding + bias), and every gradient of
 * mlm_head_backward against central differences of that reference's loss sum(w . logits):
 * d_hidden (added into a prefilled buffer, unlabelled rows untouched), d_word_emb, and the
 * head's parameters; parameter gradients accumulate (a second call doubles them). */
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

static void test_mlm_head(TestTally *t, Rng *rng) {
    Pool pool = {0};
    float *hidden = uniform(&pool, rng, N * H, -1, 1), *word_emb = uniform(&pool, rng, V * H, -1, 1);
    HeadParams p = {uniform(&pool, rng, H * H, -0.5f, 0.5f), uniform(&pool, rng, H, -0.5f, 0.5f),
                    uniform(&pool, rng, H, 0.5f, 1.5f), uniform(&pool, rng, H, -0.5f, 0.5f),
                    uniform(&pool, rng, V, -0.5f, 0.5f)};
    HeadParams g = {zeros(&pool, H * H), zeros(&pool, H), zeros(&pool, H), zeros(&pool, H),
                    zeros(&pool, V)};
    HeadActs a = {zeros(&pool, M * H), zeros(&pool, M * H), zeros(&pool, M * H),
                  zeros(&pool, M * H), zeros(&pool, M), zeros(&pool, M), nans(&pool, M * V)};
    float *w = uniform(&pool, rng, M * V, -1, 1);
    mlm_head_forward(&a, hidden, ROWS, M, &p, word_emb, H, V, EPS);
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
    mlm_head_backward(d_hidden, &g, d_word_emb, copy(&pool, w, M * V), d_tmp, &a, ROWS, M, &p,
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
    mlm_head_backward(d_hidden, &g, d_word_emb, copy(&pool, w, M * V), d_tmp, &a, ROWS, M, &p,
                      word_emb, H, V);
    err = fmax(doubling_err(&pool, g.transform_w, once_w, H * H),
               fmax(doubling_err(&pool, d_word_emb, once_emb, V * H),
                    doubling_err(&pool, g.bias, once_bias, V)));
    CHECK(t, err < 1e-6, "mlm_head parameter gradients accumulate (rel err %.2e)", err);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240617);
    omp_set_num_threads(2);
    test_mlm_head(&t, &rng);
    return tally_exit(&t);
}
