/* One loss interface over the model's heads, so a training step does not care which head it trains:
 *   MLM (pretraining):   loss = mean over labelled positions of CE(mlm_head(h), label)
 *   classification:      loss = mean_b CE(classifier(pooler(h_[CLS])), y_b)      (task_heads.h)
 *   regression:          loss = mean_b (classifier(pooler(h_[CLS])) - y_b)^2
 *   span (SQuAD):        loss = (mean_b CE(start_b, s_b) + mean_b CE(end_b, e_b)) / 2
 *   tagging:             loss = mean over labelled positions of CE(classifier(h_n), y_n)
 * with h = encoder(batch) [B*L, H]. Each head is a row of operations (LossHeadOps, loss.c) on the
 * encoder's output: loss_forward runs the encoder, then the head and its loss; loss_backward runs
 * the head's backward into d_hidden, then the encoder's, scaled by loss_scale (e.g.
 * 1/grad_accum_steps), accumulating (+=) every parameter's gradient into m->grads. */
#pragma once
#include <stdint.h>

#include "train/model/model.h"
#include "train/model/task_heads.h"

/* One batch with the targets of whichever head: MLM labels in batch.labels ([B, L],
 * IGNORE_LABEL = not predicted), task targets in targets ([B] each). num_tokens:
 * attention_mask == 1 positions. */
typedef struct {
    Batch batch;
    HeadTargets targets;
    long num_tokens;
} TrainBatch;

typedef struct LossHead LossHead;

/* What a head does after the encoder (h = h->acts->encoder_out [B*L, H]). */
typedef struct {
    const char *name; /* "mlm", "classification", "regression", "span" */
    /* The head's outputs and mean loss; num_predicted / num_correct as loss_forward's. */
    ForwardStats (*forward)(const LossHead *h, const Model *m, const TrainBatch *tb, ForwardMode mode,
                            uint64_t step_key);
    /* d(loss_scale * loss)/dh into h->acts->d_hidden_a (overwrites); the head's gradients += */
    void (*backward)(const LossHead *h, Model *m, const TrainBatch *tb, float loss_scale);
    int head_flops; /* 1: the head's products count in the step's FLOPs (the MLM decoder) */
} LossHeadOps;

struct LossHead {
    const LossHeadOps *ops;
    Activations *acts;  /* the encoder's activations (and the MLM head's) */
    HeadBuffers *heads; /* the task heads' buffers; NULL for the MLM head */
};

LossHead loss_head_mlm(Activations *acts);
/* The model's task head (span, or pooler + classifier with regression = MSE on one output). */
LossHead loss_head_task(const Model *m, Activations *acts, HeadBuffers *heads, int regression);

/* Mean loss of the batch; num_predicted counts the scored positions (MLM) or sequences
 * (classification, span; 0 for regression) and num_correct the argmax hits among them (span: both
 * ends right). mode as ForwardMode (model.h): FORWARD_TRAIN enables dropout keyed by step_key,
 * the encoder's and the task head's. */
ForwardStats loss_forward(const Model *m, LossHead *h, const TrainBatch *tb, ForwardMode mode, uint64_t step_key);
/* Gradients of the last loss_forward's loss times loss_scale, accumulated (+=) into m->grads. */
void loss_backward(Model *m, LossHead *h, const TrainBatch *tb, float loss_scale);
/* Model FLOPs of that forward + backward, for MFU reports (model_flops_per_step). */
double loss_flops(const Model *m, const LossHead *h, const TrainBatch *tb, const ForwardStats *st);
