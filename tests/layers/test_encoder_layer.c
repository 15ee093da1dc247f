/* layers/encoder_layer.c: the whole layer, Post-LN (BERT) and Pre-LN, against a double reference
 * composed here from the formulas of encoder.h (linear, layernorm, gelu and dropout written out,
 * attention by layers/attention_reference.c), with hidden and attention dropout on, padding keys,
 * and residual attention (method4) or plain absolute attention. Every gradient of
 * encoder_layer_backward (d_x, prefilled with NaN, and each parameter tensor) against central
 * differences of the reference's loss sum(w . out); parameter gradients accumulate (a second call
 * doubles them), d_x is overwritten; the forward_only forward gives the same output and saved
 * activations bit for bit (without GELU's slope). */
#include <omp.h>

#include "layers/attention_reference.h"
#include "layers/encoder.h"
#include "layers/layers.h"
#include "tests/layer_testing.h"

enum { B = 2, L = 5, H = 8, HEADS = 2, I = 16, N = B * L, REL_K = 2 };
static const float EPS = 1e-5f, HIDDEN_DROPOUT = 0.1f, ATTN_DROPOUT = 0.1f;

/* The layer's tensors in LayerParams order, as offsets into one block (float for the layer,
 * double for the reference). */
enum { QKV_W, QKV_B, REL_TABLE, OUT_W, OUT_B, NORM1_G, NORM1_B, FFN_IN_W, FFN_IN_B, FFN_OUT_W,
       FFN_OUT_B, NORM2_G, NORM2_B, NUM_TENSORS };
static const char *const TENSOR_NAMES[NUM_TENSORS] = {
    "qkv_w", "qkv_b", "rel_table", "attn_out_w", "attn_out_b", "norm1_g", "norm1_b",
    "ffn_in_w", "ffn_in_b", "ffn_out_w", "ffn_out_b", "norm2_g", "norm2_b"};

typedef struct {
    size_t offset[NUM_TENSORS + 1], size[NUM_TENSORS];
} ParamLayout;

static ParamLayout param_layout(RelKind rel) {
    const size_t table = (size_t)attention_table_rows(rel, REL_K) * attention_table_cols(rel, H / HEADS);
    const size_t sizes[NUM_TENSORS] = {3 * H * H, 3 * H, table, H * H, H, H, H, I * H, I,
                                       H * I, H, H, H};
    ParamLayout lo = {{0}, {0}};
    for (int k = 0; k < NUM_TENSORS; k++) {
        lo.size[k] = sizes[k];
        lo.offset[k + 1] = lo.offset[k] + sizes[k];
    }
    return lo;
}

static LayerParams bind(float *block, const ParamLayout *lo) {
    float *t[NUM_TENSORS];
    for (int k = 0; k < NUM_TENSORS; k++)
        t[k] = lo->size[k] ? block + lo->offset[k] : NULL;
    return (LayerParams){t[QKV_W], t[QKV_B], t[REL_TABLE], t[OUT_W], t[OUT_B], t[NORM1_G],
                         t[NORM1_B], t[FFN_IN_W], t[FFN_IN_B], t[FFN_OUT_W], t[FFN_OUT_B],
                         t[NORM2_G], t[NORM2_B]};
}

typedef struct {
    int pre_norm;
    LayerShape shape;
    LayerKeys keys;
    ParamLayout lo;
    const int *mask;
    double *x, *params, *w; /* what the finite differences perturb: x and params */
} LayerRef;

/* ---- double reference ------------------------------------------------------------------- */

static void ref_linear(double *out, const double *in, const double *W, const double *b, int rows,
                       int in_dim, int out_dim) {
    for (int n = 0; n < rows; n++)
        for (int o = 0; o < out_dim; o++) {
            double acc = b[o];
            for (int c = 0; c < in_dim; c++)
                acc += in[n * in_dim + c] * W[o * in_dim + c];
            out[n * out_dim + o] = acc;
        }
}

static void ref_layernorm(double *out, const double *in, const double *g, const double *b) {
    for (int n = 0; n < N; n++) {
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < H; c++)
            mean += in[n * H + c] / H;
        for (int c = 0; c < H; c++)
            var += (in[n * H + c] - mean) * (in[n * H + c] - mean) / H;
        for (int c = 0; c < H; c++)
            out[n * H + c] = (in[n * H + c] - mean) / sqrt(var + EPS) * g[c] + b[c];
    }
}

/* y = a + dropout(b), keep(e) = hash_uniform(key, e) >= p */
static void ref_add_dropped(double *y, const double *a, const double *b, uint64_t key) {
    for (int e = 0; e < N * H; e++)
        y[e] = a[e] + (hash_uniform(key, (uint64_t)e) >= HIDDEN_DROPOUT ? b[e] / (1.0 - HIDDEN_DROPOUT) : 0.0);
}

/* attention block: proj = W_o attention(W_qkv in + b_qkv) + b_o */
static void ref_attention_block(double *proj, const LayerRef *r, const double *in) {
    const double *P = r->params;
    const size_t *o = r->lo.offset;
    double qkv[N * 3 * H], ctx[N * H], probs[B * HEADS * L * L], carried[B * HEADS * L * L];
    ref_linear(qkv, in, P + o[QKV_W], P + o[QKV_B], N, H, 3 * H);
    attention_reference_forward(ctx, probs, carried, qkv, r->lo.size[REL_TABLE] ? P + o[REL_TABLE] : NULL,
                                r->mask, &r->shape.attn, r->keys.attn_probs);
    ref_linear(proj, ctx, P + o[OUT_W], P + o[OUT_B], N, H, H);
}

/* feed-forward block: proj = W2 gelu(W1 in + b1) + b2 */
static void ref_ffn_block(double *proj, const LayerRef *r, const double *in) {
    const double *P = r->params;
    const size_t *o = r->lo.offset;
    double hidden[N * I];
    ref_linear(hidden, in, P + o[FFN_IN_W], P + o[FFN_IN_B], N, H, I);
    for (int e = 0; e < N * I; e++)
        hidden[e] = 0.5 * hidden[e] * (1.0 + erf(hidden[e] / sqrt(2.0)));
    ref_linear(proj, hidden, P + o[FFN_OUT_W], P + o[FFN_OUT_B], N, I, H);
}

/* Post-LN: out = LN2(n1 + drop(ffn(n1))), n1 = LN1(x + drop(attn(x)));
 * Pre-LN:  out = s1 + drop(ffn(LN2(s1))), s1 = x + drop(attn(LN1(x))). Returns sum(w . out). */
static double layer_ref(const LayerRef *r, double *out) {
    const double *P = r->params;
    const size_t *o = r->lo.offset;
    double a[N * H], proj[N * H], s1[N * H], n1[N * H], s2[N * H], result[N * H];
    if (!r->pre_norm) {
        ref_attention_block(proj, r, r->x);
        ref_add_dropped(s1, r->x, proj, r->keys.attn_out);
        ref_layernorm(n1, s1, P + o[NORM1_G], P + o[NORM1_B]);
        ref_ffn_block(proj, r, n1);
        ref_add_dropped(s2, n1, proj, r->keys.ffn_out);
        ref_layernorm(result, s2, P + o[NORM2_G], P + o[NORM2_B]);
    } else {
        ref_layernorm(a, r->x, P + o[NORM1_G], P + o[NORM1_B]);
        ref_attention_block(proj, r, a);
        ref_add_dropped(s1, r->x, proj, r->keys.attn_out);
        ref_layernorm(n1, s1, P + o[NORM2_G], P + o[NORM2_B]);
        ref_ffn_block(proj, r, n1);
        ref_add_dropped(result, s1, proj, r->keys.ffn_out);
    }
    double loss = 0.0;
    for (int e = 0; e < N * H; e++) {
        loss += r->w[e] * result[e];
        if (out)
            out[e] = result[e];
    }
    return loss;
}

static double layer_loss(const void *ctx) { return layer_ref(ctx, NULL); }

/* ---- the test --------------------------------------------------------------------------- */

static void test_encoder_layer(TestTally *t, Rng *rng, int pre_norm, RelKind rel, int residual) {
    Pool pool = {0};
    char what[96];
    snprintf(what, sizeof what, "encoder_layer %s-LN %s%s", pre_norm ? "pre" : "post",
             rel_kind_name(rel), residual ? " + residual" : "");
    const ParamLayout lo = param_layout(rel);
    const size_t n_params = lo.offset[NUM_TENSORS], scores = (size_t)B * HEADS * L * L;
    float *params = uniform(&pool, rng, n_params, -0.5f, 0.5f), *grads = zeros(&pool, n_params);
    for (size_t e = 0; e < H; e++) { /* layernorm gains in [0.5, 1.5] */
        params[lo.offset[NORM1_G] + e] += 1.0f;
        params[lo.offset[NORM2_G] + e] += 1.0f;
    }
    const LayerParams p = bind(params, &lo);
    LayerParams g = bind(grads, &lo);
    int mask[N];
    for (int n = 0; n < N; n++)
        mask[n] = !(n / L == 1 && n % L >= L - 2); /* batch row 1: last two keys padded */
    const LayerShape shape = {
        .N = N, .H = H, .ffn_dim = I, .pre_norm = pre_norm, .eps = EPS,
        .hidden_dropout = HIDDEN_DROPOUT,
        .attn = {.B = B, .L = L, .H = H, .num_heads = HEADS, .rel = rel, .rel_k = REL_K,
                 .residual = residual, .first_layer = 1, .carried_scale = 1.0f,
                 .dropout = ATTN_DROPOUT, .threads = omp_get_max_threads()}};
    const LayerKeys keys = {hash_key(5, 1, 1), hash_key(5, 1, 2), hash_key(5, 1, 3)};
    LayerActs a = {zeros(&pool, N * H), zeros(&pool, N), zeros(&pool, N), zeros(&pool, N * 3 * H),
                   zeros(&pool, scores), NULL, zeros(&pool, N * H), zeros(&pool, N * H),
                   zeros(&pool, N * H), zeros(&pool, N), zeros(&pool, N), zeros(&pool, N * I),
                   zeros(&pool, N * I), zeros(&pool, N * H), NULL, NULL, NULL, NULL};
    LayerScratch s = {zeros(&pool, N * H), zeros(&pool, N * H), zeros(&pool, N * H),
                      zeros(&pool, N * I), zeros(&pool, N * 3 * H), zeros(&pool, N * H),
                      zeros(&pool, attention_scratch_floats(&shape.attn)),
                      residual ? zeros(&pool, scores) : NULL, residual ? zeros(&pool, scores) : NULL, NULL};
    float *x = uniform(&pool, rng, N * H, -1, 1), *w = uniform(&pool, rng, N * H, -1, 1);
    const float *out = encoder_layer_forward(&a, &s, x, &p, mask, &shape, keys);

    LayerRef r = {pre_norm, shape, keys, lo, mask, doubles(&pool, x, N * H),
                  doubles(&pool, params, n_params), doubles(&pool, w, N * H)};
    double *expected = pool_alloc(&pool, N * H, sizeof *expected);
    layer_ref(&r, expected);
    double err = rel_err(out, expected, N * H);
    CHECK(t, err < 1e-5, "%s: forward matches the reference (rel err %.2e)", what, err);

    float *d_x = nans(&pool, N * H);
    encoder_layer_backward(d_x, copy(&pool, w, N * H), &g, &s, x, &a, &p, &shape, keys);
    char name[160];
    snprintf(name, sizeof name, "%s: d_x (prefilled NaN)", what);
    check_grad(t, &pool, name, d_x, r.x, N * H, layer_loss, &r);
    for (int k = 0; k < NUM_TENSORS; k++) {
        if (!lo.size[k])
            continue;
        snprintf(name, sizeof name, "%s: d_%s", what, TENSOR_NAMES[k]);
        check_grad(t, &pool, name, grads + lo.offset[k], r.params + lo.offset[k], lo.size[k],
                   layer_loss, &r);
    }
    float *once = copy(&pool, grads, n_params), *d_x_again = nans(&pool, N * H);
    if (residual)
        memset(s.d_carried, 0, scores * sizeof(float));
    encoder_layer_backward(d_x_again, copy(&pool, w, N * H), &g, &s, x, &a, &p, &shape, keys);
    err = doubling_err(&pool, grads, once, n_params);
    CHECK(t, err < 1e-6 && same_bits(d_x, d_x_again, N * H),
          "%s: parameter gradients accumulate, d_x is overwritten (rel err %.2e)", what, err);

    /* forward only: the same output and saved activations (bits), GELU's slope not written */
    LayerShape eval_shape = shape;
    eval_shape.forward_only = 1;
    LayerActs f = {nans(&pool, N * H), nans(&pool, N), nans(&pool, N), nans(&pool, N * 3 * H),
                   nans(&pool, scores), NULL, nans(&pool, N * H), nans(&pool, N * H),
                   nans(&pool, N * H), nans(&pool, N), nans(&pool, N), nans(&pool, N * I),
                   nans(&pool, N * I), nans(&pool, N * H), NULL, NULL, NULL, NULL};
    float *slope_before = copy(&pool, f.ffn_slope, N * I);
    const float *out_only = encoder_layer_forward(&f, &s, x, &p, mask, &eval_shape, keys);
    const int same = same_bits(out_only, out, N * H) && same_bits(f.norm1, a.norm1, N * H) &&
                     same_bits(f.norm2, a.norm2, N * H) && same_bits(f.ffn_act, a.ffn_act, N * I) &&
                     same_bits(f.qkv, a.qkv, N * 3 * H) && same_bits(f.probs, a.probs, scores);
    CHECK(t, same && same_bits(f.ffn_slope, slope_before, N * I),
          "%s: forward_only gives the training forward's output and activations bit for bit, "
          "without GELU's slope", what);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240618);
    omp_set_num_threads(2);
    test_encoder_layer(&t, &rng, 0, REL_NONE, 0);
    test_encoder_layer(&t, &rng, 0, REL_METHOD4, 1);
    test_encoder_layer(&t, &rng, 1, REL_NONE, 0);
    test_encoder_layer(&t, &rng, 1, REL_METHOD4, 1);
    return tally_exit(&t);
}
