/* layers/embedding.c: forward with and without positions against a double reference, backward's
 * d_word (repeated ids), d_type, d_pos against central differences of sum(w . out), d_word
 * accumulating, bit-identical results with 1 and 2 threads over several column blocks. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


typedef struct {
    int B, L, H;
    const int *ids, *types;
    double *word, *type, *pos, *w; /* pos may be NULL */
} EmbeddingRef;

static double embedding_ref_out(const EmbeddingRef *r, int n, int c) {
    return r->word[r->ids[n] * r->H + c] + r->type[r->types[n] * r->H + c] +
           (r->pos ? r->pos[(n % r->L) * r->H + c] : 0.0);
}

static double embedding_loss(const void *ctx) {
    const EmbeddingRef *r = ctx;
    double loss = 0.0;
    for (int n = 0; n < r->B * r->L; n++)
        for (int c = 0; c < r->H; c++)
            loss += r->w[n * r->H + c] * embedding_ref_out(r, n, c);
    return loss;
}

static void test_embedding(TestTally *t, Rng *rng, int use_pos) {
    Pool pool = {0};
    const int B = 2, L = 5, H = 7, V = 4, T = 2, P = 6, N = B * L; /* 10 ids over 4 rows */
    int *ids = ints_below(&pool, rng, N, V), *types = ints_below(&pool, rng, N, T);
    float *word = uniform(&pool, rng, V * H, -1, 1), *type = uniform(&pool, rng, T * H, -1, 1);
    float *pos = use_pos ? uniform(&pool, rng, P * H, -1, 1) : NULL;
    float *w = uniform(&pool, rng, N * H, -1, 1), *out = nans(&pool, N * H);
    embedding_forward(out, ids, types, word, type, pos, B, L, H);
    EmbeddingRef r = {B, L, H, ids, types, doubles(&pool, word, V * H),
                      doubles(&pool, type, T * H), pos ? doubles(&pool, pos, P * H) : NULL,
                      doubles(&pool, w, N * H)};
    double *expected = pool_alloc(&pool, N * H, sizeof *expected);
    for (int k = 0; k < N * H; k++)
        expected[k] = embedding_ref_out(&r, k / H, k % H);
    double err = rel_err(out, expected, N * H);
    CHECK(t, err < 1e-6, "embedding_forward %s pos matches (rel err %.2e)",
          use_pos ? "with" : "without", err);
    float *d_word = zeros(&pool, V * H), *d_type = zeros(&pool, T * H);
    float *d_pos = use_pos ? zeros(&pool, P * H) : NULL;
    embedding_backward(d_word, d_type, d_pos, w, ids, types, B, L, H);
    check_grad(t, &pool, "embedding d_word (repeated ids)", d_word, r.word, V * H,
               embedding_loss, &r);
    check_grad(t, &pool, "embedding d_type", d_type, r.type, T * H, embedding_loss, &r);
    if (use_pos)
        check_grad(t, &pool, "embedding d_pos", d_pos, r.pos, P * H, embedding_loss, &r);
    float *d_word_once = copy(&pool, d_word, V * H);
    embedding_backward(d_word, d_type, d_pos, w, ids, types, B, L, H);
    err = doubling_err(&pool, d_word, d_word_once, V * H);
    CHECK(t, err < 1e-6, "embedding d_word accumulates (rel err %.2e)", err);
    pool_release(&pool);
}

static void test_embedding_threads(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int B = 4, L = 32, H = 200, V = 7, T = 2, N = B * L; /* 4 column blocks */
    int *ids = ints_below(&pool, rng, N, V), *types = ints_below(&pool, rng, N, T);
    float *word = uniform(&pool, rng, V * H, -1, 1), *type = uniform(&pool, rng, T * H, -1, 1);
    float *pos = uniform(&pool, rng, L * H, -1, 1), *d_out = uniform(&pool, rng, N * H, -1, 1);
    float *out[2], *d_word[2], *d_type[2], *d_pos[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        out[run] = zeros(&pool, N * H), d_word[run] = zeros(&pool, V * H);
        d_type[run] = zeros(&pool, T * H), d_pos[run] = zeros(&pool, L * H);
        embedding_forward(out[run], ids, types, word, type, pos, B, L, H);
        embedding_backward(d_word[run], d_type[run], d_pos[run], d_out, ids, types, B, L, H);
    }
    CHECK(t, same_bits(out[0], out[1], N * H) && same_bits(d_word[0], d_word[1], V * H) &&
                 same_bits(d_type[0], d_type[1], T * H) && same_bits(d_pos[0], d_pos[1], L * H),
          "embedding forward/backward bit-identical with 1 and 2 threads (N=%d H=%d V=%d)", N, H,
          V);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240612);
    omp_set_num_threads(2);
    test_embedding(&t, &rng, 1);
    test_embedding(&t, &rng, 0);
    test_embedding_threads(&t, &rng);
    return tally_exit(&t);
}
