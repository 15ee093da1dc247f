/* layers/crossentropy.c: loss, probabilities and n_correct against a double reference
 * (IGNORE_LABEL rows, argmax ties to the lowest index), d_logits against central differences of
 * the reference loss scaled by d_loss, d_logits prefilled with NaN, aliasing, every row ignored,
 * bit-identical results with 1 and 2 threads at vocabulary size; crossentropy_backward_bias against
 * crossentropy_backward and the column sums in row order (bias_sums's), bit for bit, aliased, with an
 * ignored row and labels at column blocks' edges, at 1, 2 and 3 threads. */
#include <omp.h>

#include "layers/layers.h"
#include "tests/layer_testing.h"


typedef struct {
    int M, V;
    const int *labels;
    double *logits, d_loss; /* loss is scaled by d_loss so its gradient is d_logits */
} CrossEntropyRef;

static double crossentropy_loss(const void *ctx) {
    const CrossEntropyRef *r = ctx;
    double row[64], loss = 0.0;
    int labelled = 0;
    for (int m = 0; m < r->M; m++) {
        if (r->labels[m] == IGNORE_LABEL)
            continue;
        softmax_ref_row(row, r->logits + m * r->V, r->V);
        loss -= log(row[r->labels[m]]);
        labelled++;
    }
    return labelled ? r->d_loss * loss / labelled : 0.0;
}

/* rows whose first maximal logit is at the label */
static int argmax_correct(const float *logits, const int *labels, int M, int V) {
    int correct = 0;
    for (int m = 0; m < M; m++) {
        int best = 0;
        for (int c = 1; c < V; c++)
            best = logits[m * V + c] > logits[m * V + best] ? c : best;
        correct += labels[m] == best;
    }
    return correct;
}

static void test_crossentropy(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const int M = 6, V = 11, n = M * V;
    const float d_loss = 1.7f;
    int *labels = ints_below(&pool, rng, M, V);
    labels[1] = labels[4] = IGNORE_LABEL;
    float *logits = uniform(&pool, rng, n, -3, 3), *probs = nans(&pool, n);
    float *d_logits = nans(&pool, n);
    for (int m = 0; m < M; m += 3) /* rows 0 and 3 predict their label */
        logits[m * V + labels[m]] += 4.0f;
    int n_correct = -1;
    const float loss = crossentropy_forward(probs, &n_correct, logits, labels, M, V);
    crossentropy_backward(d_logits, probs, labels, M, V, d_loss);
    CrossEntropyRef r = {M, V, labels, doubles(&pool, logits, n), 1.0};
    const double expected_loss = crossentropy_loss(&r);
    double *expected = pool_alloc(&pool, n, sizeof *expected);
    for (int m = 0; m < M; m++)
        softmax_ref_row(expected + m * V, r.logits + m * V, V);
    double err = fmax(fabs(loss - expected_loss) / expected_loss, rel_err(probs, expected, n));
    CHECK(t, err < 1e-6, "crossentropy_forward loss %.6f and probs match (rel err %.2e)",
          (double)loss, err);
    const int expected_correct = argmax_correct(logits, labels, M, V);
    CHECK(t, n_correct == expected_correct, "crossentropy n_correct %d (expected %d)", n_correct,
          expected_correct);
    r.d_loss = d_loss;
    check_grad(t, &pool, "crossentropy d_logits (-100 rows, d_loss 1.7, prefilled NaN)", d_logits,
               r.logits, n, crossentropy_loss, &r);

    float *aliased = copy(&pool, logits, n);
    int alias_correct = -1;
    const float alias_loss = crossentropy_forward(aliased, &alias_correct, aliased, labels, M, V);
    int ok = alias_loss == loss && alias_correct == n_correct && same_bits(aliased, probs, n);
    crossentropy_backward(aliased, aliased, labels, M, V, d_loss);
    CHECK(t, ok && same_bits(aliased, d_logits, n),
          "crossentropy with probs == logits and d_logits == probs");

    /* ties go to the lowest index: row 0 (label 5) is wrong, row 1 (label 2) right */
    const int tie_labels[3] = {5, 2, 0};
    float tie_logits[3 * 8] = {0}, tie_probs[3 * 8];
    for (int m = 0; m < 2; m++)
        tie_logits[m * 8 + 2] = tie_logits[m * 8 + 5] = 3.0f;
    tie_logits[2 * 8 + 7] = 1.0f;
    crossentropy_forward(tie_probs, &n_correct, tie_logits, tie_labels, 3, 8);
    CHECK(t, n_correct == 1, "crossentropy argmax ties go to the lowest index (%d correct)",
          n_correct);

    CHECK(t, IGNORE_LABEL == -100, "IGNORE_LABEL is PyTorch's ignore_index -100 (the batch files "
          "of tests/reference/reference.py use it)");
    const int none[2] = {IGNORE_LABEL, IGNORE_LABEL};
    const float none_loss = crossentropy_forward(probs, &n_correct, logits, none, 2, V);
    crossentropy_backward(d_logits, probs, none, 2, V, d_loss);
    int all_zero = 1;
    for (int k = 0; k < 2 * V; k++)
        all_zero &= d_logits[k] == 0.0f;
    CHECK(t, none_loss == 0.0f && n_correct == 0 && all_zero,
          "crossentropy with every label -100: loss 0, no correct rows, zero gradient");

    const int big_M = 8, vocab = 30522, big = big_M * vocab;
    int *big_labels = ints_below(&pool, rng, big_M, vocab), correct[2];
    big_labels[3] = IGNORE_LABEL;
    float *x = uniform(&pool, rng, big, -8, 8), *p[2], *d_x[2], big_loss[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        p[run] = zeros(&pool, big), d_x[run] = zeros(&pool, big);
        big_loss[run] = crossentropy_forward(p[run], &correct[run], x, big_labels, big_M, vocab);
        crossentropy_backward(d_x[run], p[run], big_labels, big_M, vocab, 1.0f);
    }
    CHECK(t, big_loss[0] == big_loss[1] && correct[0] == correct[1] &&
                 same_bits(p[0], p[1], big) && same_bits(d_x[0], d_x[1], big),
          "crossentropy forward/backward bit-identical with 1 and 2 threads (M=%d V=%d)", big_M,
          vocab);

    /* crossentropy_backward_bias: d_logits and db += column sums, the bits of the two passes */
    big_labels[0] = 0, big_labels[1] = vocab - 1, big_labels[2] = 1023, big_labels[4] = 1024;
    float *want_d = zeros(&pool, big), *want_db = uniform(&pool, rng, vocab, -1, 1);
    crossentropy_forward(p[0], NULL, x, big_labels, big_M, vocab);
    crossentropy_backward(want_d, p[0], big_labels, big_M, vocab, 0.75f);
    float *db_start = copy(&pool, want_db, vocab);
    for (int c = 0; c < vocab; c++) {
        float column = 0.0f;
        for (int m = 0; m < big_M; m++)
            column += want_d[(size_t)m * vocab + c];
        want_db[c] += column;
    }
    int fused_same = 1;
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *d = copy(&pool, p[0], big), *db = copy(&pool, db_start, vocab); /* d aliases the probabilities */
        crossentropy_backward_bias(d, db, d, big_labels, big_M, vocab, 0.75f);
        fused_same &= same_bits(d, want_d, big) && same_bits(db, want_db, vocab);
    }
    omp_set_num_threads(2);
    CHECK(t, fused_same, "crossentropy_backward_bias: d_logits and the bias gradient with the bits of "
          "crossentropy_backward and column sums in row order, aliased, at 1, 2 and 3 threads (M=%d V=%d, an "
          "ignored row, labels 0, 1023, 1024 and V-1)", big_M, vocab);

    /* The loss alone at 1, 2, 3 and 7 threads, over rows whose losses span ~30 binary orders (a
     * label far above or far below its row), where the order of the additions changes the sum's
     * last bits: the same bits at every count. */
    const int many = 601, small_v = 40;
    int *many_labels = ints_below(&pool, rng, many, small_v);
    float *many_x = uniform(&pool, rng, (size_t)many * small_v, -1, 1), *many_p = zeros(&pool, (size_t)many * small_v);
    for (int m = 0; m < many; m++)
        many_x[(size_t)m * small_v + many_labels[m]] = m % 3 == 0 ? 12.0f + (float)(m % 7) : -3.0f * (float)(m % 11);
    float many_loss[4];
    const int counts[4] = {1, 2, 3, 7};
    for (int run = 0; run < 4; run++) {
        omp_set_num_threads(counts[run]);
        many_loss[run] = crossentropy_forward(many_p, NULL, many_x, many_labels, many, small_v);
    }
    omp_set_num_threads(2);
    CHECK(t, many_loss[0] == many_loss[1] && many_loss[0] == many_loss[2] && many_loss[0] == many_loss[3],
          "crossentropy loss bit-identical at 1, 2, 3 and 7 threads (M=%d, losses over ~30 binary orders): "
          "%.9g %.9g %.9g %.9g", many, many_loss[0], many_loss[1], many_loss[2], many_loss[3]);
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20240614);
    omp_set_num_threads(2);
    test_crossentropy(&t, &rng);
    return tally_exit(&t);
}
