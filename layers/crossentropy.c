/* Softmax cross-entropy over a vocabulary, rows labelled IGNORE_LABEL (-100) ignored (as PyTorch). */
#include "layers/layers.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"

static int count_labelled(const int *labels, int M) {
    int labelled = 0;
    for (int m = 0; m < M; m++)
        labelled += labels[m] != IGNORE_LABEL;
    return labelled;
}

/* probs [M,V] = softmax(logits) (may alias logits); returns mean over labelled rows of
 * -log probs[label] = logsumexp(x) - x_label. The row's argmax (lowest index on ties) equals
 * the label iff x_label == max and no earlier column reaches max. */
float crossentropy_forward(float *probs, int *n_correct, const float *logits, const int *labels,
                           int M, int V) {
    for (int m = 0; m < M; m++)
        RP_CHECK(labels[m] == IGNORE_LABEL || (labels[m] >= 0 && labels[m] < V),
                 "crossentropy: label %d of row %d is neither in [0, %d) nor %d", labels[m], m,
                 V, IGNORE_LABEL);
    /* The loss is summed in CE_PARTS fixed parts of the rows, each in row order, then the parts in
     * order: the same bits at any thread count (a sum per thread would depend on it). */
    enum { CE_PARTS = 256 };
    double part_loss[CE_PARTS];
    int correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct)
    for (int part = 0; part < CE_PARTS; part++) {
        double loss = 0.0;
        for (int m = (int)((long)M * part / CE_PARTS); m < (int)((long)M * (part + 1) / CE_PARTS); m++) {
            const float *x = logits + (size_t)m * V;
            float *p = probs + (size_t)m * V;
            const int label = labels[m];
            const float max = softmax_row_max(x, V);
            const float x_label = label != IGNORE_LABEL ? x[label] : 0.0f;
            if (label != IGNORE_LABEL && x_label == max) {
                int earlier_max = 0;
#pragma omp simd reduction(+ : earlier_max)
                for (int c = 0; c < label; c++)
                    earlier_max += x[c] == max;
                correct += earlier_max == 0;
            }
            /* x may alias p: everything read from x is read above */
            const float logsumexp = softmax_row_normalize(p, x, V, max);
            if (label != IGNORE_LABEL)
                loss += (double)(logsumexp - x_label);
        }
        part_loss[part] = loss;
    }
    double loss_sum = 0.0;
    for (int part = 0; part < CE_PARTS; part++)
        loss_sum += part_loss[part];
    if (n_correct)
        *n_correct = correct;
    const int labelled = count_labelled(labels, M);
    return labelled ? (float)(loss_sum / labelled) : 0.0f;
}

/* d_logits [M,V] = (probs - onehot(label)) * d_loss / M', zero rows where label = IGNORE_LABEL;
 * d_logits may alias probs. */
void crossentropy_backward(float *d_logits, const float *probs, const int *labels, int M, int V,
                           float d_loss) {
    const int labelled = count_labelled(labels, M);
    const float scale = labelled ? d_loss / (float)labelled : 0.0f;
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *d = d_logits + (size_t)m * V;
        const float *p = probs + (size_t)m * V;
        const int label = labels[m];
        if (label == IGNORE_LABEL) {
            memset(d, 0, (size_t)V * sizeof *d);
            continue;
        }
        const float p_label = p[label];
#pragma omp simd
        for (int c = 0; c < V; c++)
            d[c] = p[c] * scale;
        d[label] = (p_label - 1.0f) * scale;
    }
}

/* The same d_logits, and db [V] += its column sums (a decoder's bias gradient), in one pass: threads
 * own column blocks (col_blocks) and walk the rows in order, so each column is summed as bias_sums
 * sums it (layers/linear.c) and d as crossentropy_backward makes it: the bits of the two passes. */
static __attribute__((noinline)) void backward_bias_pass(float *d_logits, float *restrict db, const float *probs,
                                                         const int *labels, int M, int V, float scale) {
    const ColBlocks blocks = col_blocks(V);
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc[COL_BLOCK_MAX] = {0};
        for (int m = 0; m < M; m++) {
            float *d = d_logits + (size_t)m * V + c0;
            const float *p = probs + (size_t)m * V + c0;
            if (labels[m] == IGNORE_LABEL) {
                memset(d, 0, (size_t)width * sizeof *d);
                continue; /* adds +0 to every column's sum: nothing */
            }
            const int label = labels[m] - c0; /* in this block when 0 .. width - 1 */
            const float p_label = label >= 0 && label < width ? p[label] : 0.0f; /* d may alias p */
#pragma omp simd
            for (int c = 0; c < width; c++)
                d[c] = p[c] * scale;
            if (label >= 0 && label < width)
                d[label] = (p_label - 1.0f) * scale;
            for (int c = 0; c < width; c++)
                acc[c] += d[c];
        }
        for (int c = 0; c < width; c++)
            db[c0 + c] += acc[c];
    }
}

void crossentropy_backward_bias(float *d_logits, float *restrict db, const float *probs, const int *labels, int M,
                                int V, float d_loss) {
    const int labelled = count_labelled(labels, M);
    const float scale = labelled ? d_loss / (float)labelled : 0.0f;
    OMP_TEAM_OR_ALONE(backward_bias_pass(d_logits, db, probs, labels, M, V, scale));
}
