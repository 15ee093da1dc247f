/* Fine-tuning heads on the encoder's hidden states h = model_encode(...) [N = B*L, H].
 *
 * Sequence head (classification, regression), as HuggingFace BertForSequenceClassification:
 *   x      = h[b*L]                          [B, H]  the [CLS] rows
 *   pooled = tanh(x W_p^T + b_p)             [B, H]  bert/pooler/dense
 *   z      = dropout(pooled, hidden_dropout) [B, H]
 *   logits = z W_c^T + b_c                   [B, C]  classifier
 *   loss   = mean_b CE(logits_b, y_b)   or   mean_b (logits_b - y_b)^2   (regression, C = 1)
 * Span head (SQuAD), as BertForQuestionAnswering (no pooler, no dropout):
 *   [start | end] = h W_qa^T + b_qa          [N, 2]  qa_outputs, -inf where attention_mask = 0
 *   loss   = (mean_b CE(start_b, s_b) + mean_b CE(end_b, e_b)) / 2, each over the real tokens
 * Token head (tagging), as BertForTokenClassification (no pooler):
 *   z      = dropout(h, hidden_dropout)      [N, H]
 *   logits = z W_c^T + b_c                   [N, C]  classifier, one row per position
 *   loss   = mean over labelled positions (token_labels != IGNORE_LABEL) of CE(logits_n, y_n)
 * (BertForQuestionAnswering's softmax also runs over the padding; masking it makes the loss of a
 * sequence independent of how far its batch is padded).
 * Buffers are allocated once for the largest batch shape; a batch [B, L] within it uses a prefix,
 * and nothing is allocated per step. */
#pragma once
#include <stdint.h>

#include "train/model/model.h"

typedef struct {
    int max_B, max_L; /* the shape the buffers hold */
    int B, L;         /* the last forward's batch shape */
    int H, C;         /* C: classifier outputs (0 for the span head) */
    int span;
    int token; /* tagging: the classifier on every position (no pooler); logits [N, C] */
    float *cls, *pooled, *dropped, *d_z, *d_x; /* [B, H] sequence head */
    float *logits, *probs, *d_logits;          /* [B, C] sequence head */
    float *span_logits, *d_span;               /* [N, 2] span head */
    float *start, *end;                        /* [B, L] start / end logits of each sequence */
    float *start_probs, *end_probs;            /* [B, L] */
    uint64_t dropout_key;
    int training;
    const int *offsets; /* the last forward's batch: [B+1] row offsets if unpadded (model.h), else NULL */
    int rows;           /* its rows: B*L, or T unpadded */
} HeadBuffers;

/* Targets of one batch: labels [B] (classification), values [B] (regression) or start/end [B]
 * token positions (span). */
typedef struct {
    const int *labels;
    const float *values;
    const int *start, *end;
    const int *token_labels; /* [B, L] tagging: label per position, IGNORE_LABEL where none */
} HeadTargets;

void head_buffers_create(HeadBuffers *hb, const Model *m, int B, int L);
void head_buffers_free(HeadBuffers *hb);

/* Logits of the model's head from the hidden states [B*L, H] of `batch` (its shape B <= max_B,
 * L <= max_L, and the span head's attention_mask): hb->logits [B, C] (sequence) or hb->start/end
 * [B, L] (span). training = 1 enables the classifier dropout keyed by step_key. */
void head_forward(const Model *m, HeadBuffers *hb, const float *hidden, const Batch *batch, int training,
                  uint64_t step_key);
/* Mean loss of the last forward against the targets; *num_correct (may be NULL) counts argmax hits
 * (classification) or sequences with both start and end right (span). Keeps what backward needs. */
float head_loss(HeadBuffers *hb, const HeadTargets *targets, int regression, int *num_correct);
/* d(loss_scale * L)/dh of the last head_loss into d_hidden [B*L, H] (overwrites), head gradients
 * += into m->grads. */
void head_backward(Model *m, HeadBuffers *hb, const float *hidden, const HeadTargets *targets, int regression,
                   float loss_scale, float *d_hidden);
