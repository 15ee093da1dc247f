/* Which position schemes can tell left from right. An encoder whose scores depend on the tokens
 * and on |i-j| alone (no absolute positions; ALiBi's -m_h|i-j|, Method 1's w_{min(|i-j|,k)}) is
 * equivariant under reversing its input: reading x_L..x_1 it gives at position i what it gave
 * at L+1-i reading x_1..x_L (layer norm, the feed-forward layers and the carried scores of
 * residual attention are per position or per score). A scheme that knows the sign of i-j
 * (absolute positions, Shaw, Methods 2-4, T5's signed buckets, RoPE) is not. So a symmetric
 * encoder can build no previous-token head from positions, which an induction circuit (MQAR)
 * needs, and reverse, the mirror of its input, is the one task it is made for (docs/positions.md).
 * Checked on a tiny random model, Post- and Pre-LN, with and without residual attention: the
 * encoder output for the reversed input against the mirrored output, relative to its largest
 * entry. Equivariant schemes agree to rounding (summation order differs: < 1e-5); the others
 * differ by > 1e-2. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/model/model.h"
#include "tests/check.h"

enum { L = 11, V = 30, H = 16 };

typedef struct {
    RelKind rel;
    int absolute, symmetric;
    const char *name;
} Scheme;

static const Scheme schemes[] = {
    {REL_NONE, 0, 1, "no positions"},  {REL_ALIBI, 0, 1, "alibi"},  {REL_METHOD1, 0, 1, "method1"},
    {REL_NONE, 1, 0, "absolute"},      {REL_SHAW, 0, 0, "shaw"},    {REL_METHOD2, 0, 0, "method2"},
    {REL_METHOD3, 0, 0, "method3"},    {REL_METHOD4, 0, 0, "method4"}, {REL_T5, 0, 0, "t5"},
    {REL_ROPE, 0, 0, "rope"},
};

/* encoder output [L, H] of one sequence (token type 0 throughout, no padding, no dropout) */
static void encode(const ModelConfig *c, const int *ids, float *out) {
    Model m;
    Activations a;
    model_create(&m, c, heads_mlm());
    model_init_weights(&m, 11);
    Rng rng; /* every parameter off its initial value: tables of zeros or ones would be symmetric */
    rng_seed(&rng, 23);
    for (size_t e = 0; e < m.table.block_floats; e++)
        m.params[e] += 0.4f * (rng_uniform(&rng) - 0.5f);
    activations_create(&a, &m, 1, L, L, PRECISION_FP32);
    int types[L] = {0}, mask[L], labels[L];
    for (int i = 0; i < L; i++)
        mask[i] = 1, labels[i] = i % 2 ? ids[i] : IGNORE_LABEL;
    const Batch batch = {1, L, ids, types, mask, labels, NULL};
    model_mlm_forward(&m, &a, &batch, FORWARD_EVAL, 0, NULL);
    memcpy(out, a.encoder_out, sizeof(float) * L * H);
    activations_free(&a);
    model_free(&m);
}

int main(void) {
    TestTally t = {0};
    int ids[L], reversed[L];
    Rng rng;
    rng_seed(&rng, 7);
    for (int i = 0; i < L; i++)
        ids[i] = 5 + (int)rng_below(&rng, V - 5);
    for (int i = 0; i < L; i++)
        reversed[i] = ids[L - 1 - i];
    for (size_t s = 0; s < sizeof schemes / sizeof *schemes; s++)
        for (int norm = 0; norm < 2; norm++)
            for (int residual = 0; residual < 2; residual++) {
                const Scheme *sc = &schemes[s];
                const ModelConfig c = {
                    .hidden_size = H, .num_layers = 2, .num_heads = 2, .intermediate_size = 24, .vocab_size = V,
                    .max_position = 16, .type_vocab_size = 2, .absolute_position = sc->absolute,
                    .norm = norm ? NORM_PRE : NORM_POST, .layer_norm_eps = 1e-12f, .init_range = 0.3f, .seed = 5,
                    .relative_position = sc->rel, .relative_k = 3, .residual_attention = residual,
                    .t5_num_buckets = 8, .t5_max_distance = 6, .rope_theta = 10000.0f};
                float forward[L * H], backward[L * H];
                encode(&c, ids, forward);
                encode(&c, reversed, backward);
                double diff = 0.0, size = 0.0;
                for (int i = 0; i < L; i++)
                    for (int h = 0; h < H; h++) {
                        const double mirrored = forward[(L - 1 - i) * H + h];
                        diff = fmax(diff, fabs(backward[i * H + h] - mirrored));
                        size = fmax(size, fabs(mirrored));
                    }
                const double rel = diff / size;
                CHECK(&t, sc->symmetric ? rel < 1e-5 : rel > 1e-2,
                      "%s, %s-LN, residual %s: the reversed input's output %s the mirrored output (%.2g)", sc->name,
                      norm ? "Pre" : "Post", residual ? "on" : "off", sc->symmetric ? "is" : "is not", rel);
            }
    return tally_exit(&t);
}
