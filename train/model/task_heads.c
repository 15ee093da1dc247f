/* Fine-tuning heads: pooler + classifier, the span head and the token head (formulas in task_heads.h). */
#include "train/model/task_heads.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"

/* Dropout site of the classifier input, distinct from the encoder's sites (model_forward.c). */
enum { SITE_CLASSIFIER = 0xC1A5 };

/* The token head (tagging, BertForTokenClassification): dropout, then the classifier on every
 * position; loss the mean CE over the labelled positions (task_heads.h). An unpadded batch's T rows
 * are laid into the [B, L] grid of the `longest` layout first (zero rows past each length, whose
 * labels are ignored), so the head's dropout mask, logits and loss index as in the padded layouts:
 * the head, a [B*L, H] x [H, C] product, is the one part of the model that computes padding. */
static void token_head_buffers(HeadBuffers *hb, size_t N) {
    size_t NH = N * (size_t)hb->H, NC = N * (size_t)hb->C;
    hb->dropped = xalloc_floats(NH);
    hb->d_z = xalloc_floats(NH);
    hb->logits = xalloc_floats(NC);
    hb->probs = xalloc_floats(NC);
    hb->d_logits = xalloc_floats(NC);
}

static void token_head_forward(const Model *m, HeadBuffers *hb, const float *hidden, int N) {
    size_t NH = (size_t)N * hb->H;
    dropout_forward(hb->dropped, hidden, NH, hb->training ? m->cfg.hidden_dropout : 0.0f, hb->dropout_key);
    linear_forward(NULL, hb->logits, hb->dropped, m->p.classifier_w, m->p.classifier_b, N, hb->H, hb->C);
}

static float token_head_loss(HeadBuffers *hb, const int *labels, int N, int *num_correct) {
    return crossentropy_forward(hb->probs, num_correct, hb->logits, labels, N, hb->C);
}

static void token_head_backward(Model *m, HeadBuffers *hb, const float *hidden, const int *labels, int N, float loss_scale,
                         float *d_hidden) {
    (void)hidden;
    int H = hb->H, C = hb->C;
    crossentropy_backward(hb->d_logits, hb->probs, labels, N, C, loss_scale);
    linear_backward(NULL, hb->d_z, m->g.classifier_w, m->g.classifier_b, hb->d_logits, hb->dropped, m->p.classifier_w,
                    N, H, C);
    dropout_backward(d_hidden, hb->d_z, (size_t)N * H, hb->training ? m->cfg.hidden_dropout : 0.0f,
                     hb->dropout_key);
}

void head_buffers_create(HeadBuffers *hb, const Model *m, int B, int L) {
    memset(hb, 0, sizeof *hb);
    int H = m->cfg.hidden_size;
    size_t N = (size_t)B * L;
    hb->max_B = hb->B = B;
    hb->max_L = hb->L = L;
    hb->H = H;
    hb->span = m->heads.span;
    hb->C = m->heads.num_labels;
    hb->token = hb->C > 0 && !m->heads.pooler;
    RP_CHECK(hb->span != (hb->C > 0), "internal: a fine-tuning model has exactly one head (span or classifier)");
    if (hb->token) {
        token_head_buffers(hb, N);
    } else if (hb->span) {
        hb->span_logits = xalloc_floats(2 * N);
        hb->d_span = xalloc_floats(2 * N);
        hb->start = xalloc_floats(N);
        hb->end = xalloc_floats(N);
        hb->start_probs = xalloc_floats(N);
        hb->end_probs = xalloc_floats(N);
    } else {
        size_t BH = (size_t)B * H, BC = (size_t)B * hb->C;
        hb->cls = xalloc_floats(BH);
        hb->pooled = xalloc_floats(BH);
        hb->dropped = xalloc_floats(BH);
        hb->d_z = xalloc_floats(BH);
        hb->d_x = xalloc_floats(BH);
        hb->logits = xalloc_floats(BC);
        hb->probs = xalloc_floats(BC);
        hb->d_logits = xalloc_floats(BC);
    }
}

void head_buffers_free(HeadBuffers *hb) {
    float *all[] = {hb->cls,    hb->pooled, hb->dropped,     hb->d_z,       hb->d_x,         hb->logits,
                    hb->probs,  hb->d_logits, hb->span_logits, hb->d_span,  hb->start,       hb->end,
                    hb->start_probs, hb->end_probs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
    memset(hb, 0, sizeof *hb);
}

void head_forward(const Model *m, HeadBuffers *hb, const float *hidden, const Batch *batch, int training,
                  uint64_t step_key) {
    const ModelParams *p = &m->p;
    int B = batch->B, L = batch->L, H = hb->H, N = batch_rows(batch);
    RP_CHECK(B <= hb->max_B && L <= hb->max_L, "batch of shape [%d, %d] does not fit the head buffers [%d, %d]", B,
             L, hb->max_B, hb->max_L);
    hb->B = B;
    hb->L = L;
    hb->offsets = batch->offsets;
    hb->rows = N;
    hb->training = training;
    hb->dropout_key = hash64(step_key ^ hash64(SITE_CLASSIFIER));
    if (hb->span) {
        linear_forward(NULL, hb->span_logits, hidden, p->span_w, p->span_b, N, H, 2);
        if (batch->offsets) { /* [T, 2] rows to [B, L], -inf past each sequence's length */
            for (int b = 0; b < B; b++)
                for (int i = 0; i < L; i++) {
                    const int len = batch_seq_rows(batch, b), n = batch->offsets[b] + i;
                    hb->start[(size_t)b * L + i] = i < len ? hb->span_logits[2 * n] : -INFINITY;
                    hb->end[(size_t)b * L + i] = i < len ? hb->span_logits[2 * n + 1] : -INFINITY;
                }
            return;
        }
        const int *mask = batch->attention_mask;
        for (int n = 0; n < N; n++) { /* padding is no candidate: its logits are -inf */
            hb->start[n] = mask[n] ? hb->span_logits[2 * n] : -INFINITY;
            hb->end[n] = mask[n] ? hb->span_logits[2 * n + 1] : -INFINITY;
        }
        return;
    }
    if (hb->token) {
        if (batch->offsets) { /* the T rows into the [B, L] grid, zero past each length (d_z is free here) */
            for (int b = 0; b < B; b++) {
                const int len = batch_seq_rows(batch, b);
                float *row = hb->d_z + (size_t)b * L * H;
                memcpy(row, hidden + (size_t)batch->offsets[b] * H, sizeof(float) * (size_t)len * H);
                memset(row + (size_t)len * H, 0, sizeof(float) * (size_t)(L - len) * H);
            }
            hidden = hb->d_z;
        }
        token_head_forward(m, hb, hidden, B * L);
        return;
    }
    for (int b = 0; b < B; b++) /* the [CLS] row; an empty sequence (a padding row) gives zeros */
        if (batch_seq_rows(batch, b))
            memcpy(hb->cls + (size_t)b * H, hidden + (size_t)batch_first_row(batch, b) * H, sizeof(float) * (size_t)H);
        else
            memset(hb->cls + (size_t)b * H, 0, sizeof(float) * (size_t)H);
    linear_forward(NULL, hb->pooled, hb->cls, p->pooler_w, p->pooler_b, B, H, H);
    tanh_forward(hb->pooled, hb->pooled, (size_t)B * H);
    dropout_forward(hb->dropped, hb->pooled, (size_t)B * H, training ? m->cfg.hidden_dropout : 0.0f,
                    hb->dropout_key);
    linear_forward(NULL, hb->logits, hb->dropped, p->classifier_w, p->classifier_b, B, H, hb->C);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

float head_loss(HeadBuffers *hb, const HeadTargets *t, int regression, int *num_correct) {
    int B = hb->B, L = hb->L, correct = 0;
    float loss;
    if (hb->token) {
        loss = token_head_loss(hb, t->token_labels, B * L, &correct);
    } else if (hb->span) {
        loss = 0.5f * (crossentropy_forward(hb->start_probs, NULL, hb->start, t->start, B, L) +
                       crossentropy_forward(hb->end_probs, NULL, hb->end, t->end, B, L));
        for (int b = 0; b < B; b++)
            correct += argmax(hb->start + (size_t)b * L, L) == t->start[b] &&
                       argmax(hb->end + (size_t)b * L, L) == t->end[b];
    } else if (regression) {
        double sum = 0;
        for (int b = 0; b < B; b++) {
            double diff = (double)hb->logits[b] - t->values[b];
            sum += diff * diff;
        }
        loss = (float)(sum / B);
    } else {
        loss = crossentropy_forward(hb->probs, &correct, hb->logits, t->labels, B, hb->C);
    }
    if (num_correct)
        *num_correct = correct;
    return loss;
}

void head_backward(Model *m, HeadBuffers *hb, const float *hidden, const HeadTargets *t, int regression,
                   float loss_scale, float *d_hidden) {
    const ModelParams *p = &m->p;
    ModelParams *g = &m->g;
    int B = hb->B, L = hb->L, H = hb->H, N = hb->rows, C = hb->C;
    if (hb->token) {
        if (!hb->offsets) {
            token_head_backward(m, hb, hidden, t->token_labels, N, loss_scale, d_hidden);
            return;
        }
        /* the grid's gradient [B*L, H] (in place in d_z), its real rows gathered back to [T, H] */
        token_head_backward(m, hb, hidden, t->token_labels, B * L, loss_scale, hb->d_z);
        for (int b = 0; b < B; b++)
            memcpy(d_hidden + (size_t)hb->offsets[b] * H, hb->d_z + (size_t)b * L * H,
                   sizeof(float) * (size_t)(hb->offsets[b + 1] - hb->offsets[b]) * H);
        return;
    }
    if (hb->span) {
        /* d start = scale (softmax(start) - onehot(s)) / (2B), likewise end; interleaved back to [N, 2] */
        crossentropy_backward(hb->start_probs, hb->start_probs, t->start, B, L, 0.5f * loss_scale);
        crossentropy_backward(hb->end_probs, hb->end_probs, t->end, B, L, 0.5f * loss_scale);
        for (int b = 0; b < B; b++) /* row n of [N, 2] is (b, i) of [B, L] */
            for (int i = 0; i < (hb->offsets ? hb->offsets[b + 1] - hb->offsets[b] : L); i++) {
                const int n = hb->offsets ? hb->offsets[b] + i : b * L + i;
                hb->d_span[2 * n] = hb->start_probs[(size_t)b * L + i];
                hb->d_span[2 * n + 1] = hb->end_probs[(size_t)b * L + i];
            }
        linear_backward(NULL, d_hidden, g->span_w, g->span_b, hb->d_span, hidden, p->span_w, N, H, 2);
        return;
    }
    if (regression)
        for (int b = 0; b < B; b++) /* d/dy of scale * mean (y - t)^2 */
            hb->d_logits[b] = 2.0f * loss_scale * (hb->logits[b] - t->values[b]) / (float)B;
    else
        crossentropy_backward(hb->d_logits, hb->probs, t->labels, B, C, loss_scale);
    linear_backward(NULL, hb->d_z, g->classifier_w, g->classifier_b, hb->d_logits, hb->dropped, p->classifier_w, B, H, C);
    dropout_backward(hb->d_z, hb->d_z, (size_t)B * H, hb->training ? m->cfg.hidden_dropout : 0.0f,
                     hb->dropout_key);
    tanh_backward(hb->d_z, hb->d_z, hb->pooled, (size_t)B * H);
    linear_backward(NULL, hb->d_x, g->pooler_w, g->pooler_b, hb->d_z, hb->cls, p->pooler_w, B, H, H);
    memset(d_hidden, 0, sizeof(float) * (size_t)N * H);
    for (int b = 0; b < B; b++)
        if (!hb->offsets || hb->offsets[b + 1] > hb->offsets[b])
            memcpy(d_hidden + (size_t)(hb->offsets ? hb->offsets[b] : b * L) * H, hb->d_x + (size_t)b * H,
                   sizeof(float) * (size_t)H);
}
