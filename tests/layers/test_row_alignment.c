/* Every row op gives the same bits whatever the addresses of its rows and the thread count: each op runs on copies of the same inputs placed at every float offset of a
 * 64-byte line (so its rows start at every alignment a vector loop can see), at 1 and 2 threads,
 * and every output must equal the first run's bit for bit. The shapes are odd (rows of 1030 and
 * 37 floats) so that consecutive rows start at different alignments too; the products of
 * linear_gelu_forward are large enough at 96 x 1030 for OpenBLAS to split them among threads. */
#include <omp.h>

#include "core/bf16.h"
#include "layers/layers.h"
#include "optim/adamw.h"
#include "tests/layer_testing.h"

enum { MAX_BUFS = 6, SHIFTS = 16 }; /* float offsets: every alignment within 64 bytes */

/* One op under test: its inputs and outputs as float arrays of the given lengths; labels and
 * scalars in arg. Outputs start at zero (some accumulate). */
typedef struct {
    const char *name;
    int n_in, n_out;
    size_t in_len[MAX_BUFS], out_len[MAX_BUFS];
    void (*run)(float *const *out, const float *const *in, const void *arg);
    const void *arg;
} RowOp;

typedef struct {
    int N, C;
    const int *labels;
} Shape;

static void check_op(TestTally *t, const RowOp *op, float *const *inputs) {
    Pool pool = {0};
    float *reference[MAX_BUFS];
    size_t mismatches = 0;
    int first_bad_shift = -1, first_bad_threads = 0;
    for (int threads = 2; threads >= 1; threads--)
        for (int shift = 0; shift < SHIFTS; shift++) {
            omp_set_num_threads(threads);
            Pool trial = {0};
            const float *in[MAX_BUFS];
            float *out[MAX_BUFS];
            for (int b = 0; b < op->n_in; b++) { /* inputs and outputs at different offsets */
                float *placed = zeros(&trial, op->in_len[b] + SHIFTS) + (shift + 3 * b) % SHIFTS;
                in[b] = memcpy(placed, inputs[b], op->in_len[b] * sizeof(float));
            }
            for (int b = 0; b < op->n_out; b++)
                out[b] = zeros(&trial, op->out_len[b] + SHIFTS) + (shift * 7 + 5 * b) % SHIFTS;
            op->run(out, in, op->arg);
            const int is_reference = threads == 2 && shift == 0;
            for (int b = 0; b < op->n_out; b++) {
                if (is_reference) {
                    reference[b] = copy(&pool, out[b], op->out_len[b]);
                    continue;
                }
                if (!same_bits(out[b], reference[b], op->out_len[b])) {
                    mismatches++;
                    if (first_bad_shift < 0)
                        first_bad_shift = shift, first_bad_threads = threads;
                }
            }
            pool_release(&trial);
        }
    omp_set_num_threads(2);
    CHECK(t, mismatches == 0,
          "%s: the same bits with its rows at every alignment and at 1 and 2 threads (%zu outputs "
          "differ; first at offset %d, %d threads)",
          op->name, mismatches, first_bad_shift, first_bad_threads);
    pool_release(&pool);
}

static void run_layernorm(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    layernorm_forward(out[0], out[1], out[2], in[0], in[1], in[2], s->N, s->C, 1e-12f);
}

static void run_residual_layernorm(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    residual_layernorm_forward(out[0], out[1], out[2], out[3], in[0], in[1], in[2], in[3], in[4],
                               s->N, s->C, 1e-12f, 0.1f, 77);
}

static void run_layernorm_backward(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    layernorm_backward(out[0], out[1], out[2], in[0], in[1], in[2], in[3], in[4], s->N, s->C);
}

static void run_residual_layernorm_backward(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    residual_layernorm_backward(out[0], out[1], out[2], out[3], out[4], out[5], in[0], in[1], in[2],
                                in[3], in[4], in[5], s->N, s->C, 0.1f, 77);
}

static void run_softmax_rows(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    for (int n = 0; n < s->N; n++) {
        const float *row = in[0] + (size_t)n * s->C;
        out[1][n] = softmax_row_normalize(out[0] + (size_t)n * s->C, row, s->C, softmax_row_max(row, s->C));
        softmax_row_probs(out[2] + (size_t)n * s->C, row, s->C, softmax_row_max(row, s->C));
    }
}

static void run_crossentropy(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    int correct = 0;
    out[1][0] = crossentropy_forward(out[0], &correct, in[0], s->labels, s->N, s->C);
    out[1][1] = (float)correct;
    crossentropy_backward(out[2], out[0], s->labels, s->N, s->C, 1.0f);
}

static void run_gelu(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    gelu_forward(out[0], in[0], (size_t)s->N * s->C);
    gelu_backward(out[1], in[1], in[0], (size_t)s->N * s->C);
}

/* the training pass (slope) and the forward-only pass write act with the same bits */
static void run_linear_gelu(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    const int I = 24;
    linear_gelu_forward(NULL, out[0], out[1], in[0], in[1], in[2], s->N, I, s->C);
    linear_gelu_forward(NULL, NULL, out[2], in[0], in[1], in[2], s->N, I, s->C);
    const size_t n = (size_t)s->N * s->C;
    out[3][0] = same_bits(out[1], out[2], n) ? 1.0f : 0.0f; /* the reference must have it too */
    gelu_bias_backward(out[4], out[5], in[3], out[0], s->N, s->C);
}

static void run_dropout(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    const size_t n = (size_t)s->N * s->C;
    dropout_forward(out[0], in[0], n, 0.1f, 99);
    dropout_backward(out[1], in[0], n, 0.1f, 99);
    dropout_bias_backward(out[2], out[3], in[0], s->N, s->C, 0.1f, 99);
}

static void run_bf16_convert(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg; /* bf16 pairs written into float-sized storage */
    bf16_convert((bf16 *)out[0], (size_t)s->C, in[0], (size_t)s->C, (size_t)s->N, (size_t)s->C);
}

static void run_grad_norm(float *const *out, const float *const *in, const void *arg) {
    const Shape *s = arg;
    const double sum = grad_sum_squares(in[0], (size_t)s->N * s->C);
    memcpy(out[0], &sum, sizeof sum);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20261202);
    Pool pool = {0};
    omp_set_num_threads(2);
    const int shapes[][2] = {{5, 1030}, {37, 37}, {96, 1030}}; /* the last: big enough for threaded products */
    for (int shape = 0; shape < 3; shape++) {
        const int N = shapes[shape][0], C = shapes[shape][1];
        const size_t NC = (size_t)N * C;
        int *labels = ints_below(&pool, &rng, (size_t)N, C);
        labels[N - 1] = IGNORE_LABEL;
        const Shape s = {N, C, labels};
        float *x = uniform(&pool, &rng, NC, -3, 3), *g = uniform(&pool, &rng, NC, -1, 1);
        float *res = uniform(&pool, &rng, NC, -1, 1), *bias = uniform(&pool, &rng, (size_t)C, -1, 1);
        float *gamma = uniform(&pool, &rng, (size_t)C, 0.5f, 1.5f), *beta = uniform(&pool, &rng, (size_t)C, -1, 1);
        float *mean = zeros(&pool, (size_t)N), *rstd = zeros(&pool, (size_t)N), *normed = zeros(&pool, NC);
        layernorm_forward(normed, mean, rstd, x, gamma, beta, N, C, 1e-12f);
        float *lin_in = uniform(&pool, &rng, (size_t)N * 24, -1, 1), *lin_w = uniform(&pool, &rng, (size_t)C * 24, -0.5f, 0.5f);
        const char *names[] = {"layernorm_forward", "residual_layernorm_forward", "layernorm_backward",
                               "residual_layernorm_backward", "softmax_row_normalize and softmax_row_probs", "crossentropy",
                               "gelu_forward / gelu_backward", "linear_gelu_forward (training, forward only) and gelu_bias_backward", "dropout", "bf16_convert", "grad_sum_squares"};
        const size_t n2 = NC, nC = (size_t)C, nN = (size_t)N;
        const RowOp ops[] = {
            {NULL, 3, 3, {n2, nC, nC}, {n2, nN, nN}, run_layernorm, &s},
            {NULL, 5, 4, {n2, n2, nC, nC, nC}, {n2, n2, nN, nN}, run_residual_layernorm, &s},
            {NULL, 5, 3, {n2, n2, nC, nN, nN}, {n2, nC, nC}, run_layernorm_backward, &s},
            {NULL, 6, 6, {n2, n2, n2, nC, nN, nN}, {n2, n2, nC, nC, nC, 2 * nN}, run_residual_layernorm_backward, &s},
            {NULL, 1, 3, {n2}, {n2, nN, n2}, run_softmax_rows, &s},
            {NULL, 1, 3, {n2}, {n2, 2, n2}, run_crossentropy, &s},
            {NULL, 2, 2, {n2, n2}, {n2, n2}, run_gelu, &s},
            {NULL, 4, 6, {nN * 24, nC * 24, nC, n2}, {n2, n2, n2, 1, n2, nC}, run_linear_gelu, &s},
            {NULL, 1, 4, {n2}, {n2, n2, n2, nC}, run_dropout, &s},
            {NULL, 1, 1, {n2}, {n2}, run_bf16_convert, &s},
            {NULL, 1, 1, {n2}, {2}, run_grad_norm, &s},
        };
        float *const inputs[][MAX_BUFS] = {
            {x, gamma, beta},
            {res, x, bias, gamma, beta},
            {g, x, gamma, mean, rstd},
            {g, res, x, gamma, mean, rstd},
            {x},
            {x},
            {x, g},
            {lin_in, lin_w, bias, g},
            {x},
            {x},
            {g},
        };
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            RowOp op = ops[k];
            char label[160];
            snprintf(label, sizeof label, "%s [%d x %d]", names[k], N, C);
            op.name = label;
            check_op(&t, &op, inputs[k]);
        }
        /* linear_gelu's own claim, also on the reference placement */
        float *slope = zeros(&pool, NC), *act = zeros(&pool, NC), *act_only = zeros(&pool, NC);
        omp_set_num_threads(1);
        linear_gelu_forward(NULL, NULL, act_only, lin_in, lin_w, bias, N, 24, C);
        omp_set_num_threads(2);
        linear_gelu_forward(NULL, slope, act, lin_in, lin_w, bias, N, 24, C);
        CHECK(&t, same_bits(act, act_only, NC),
              "linear_gelu_forward: forward only at 1 thread gives the training forward's act at 2 [%d x %d]", N, C);
    }
    pool_release(&pool);
    return tally_exit(&t);
}
