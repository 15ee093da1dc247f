/* The loss interface over the MLM and task heads (loss.h): one row of operations per head. */
#include "train/model/loss.h"

#include "core/common.h"
#include "layers/layers.h"

static ForwardStats mlm_forward(const LossHead *h, const Model *m, const TrainBatch *tb, ForwardMode mode,
                                uint64_t step_key) {
    (void)step_key; /* the MLM head has no dropout */
    return model_mlm_head_forward(m, h->acts, &tb->batch, mode, NULL);
}

static void mlm_backward(const LossHead *h, Model *m, const TrainBatch *tb, float loss_scale) {
    model_mlm_head_backward(m, h->acts, &tb->batch, loss_scale);
}

/* The task heads: head_forward + head_loss (task_heads.h), regression without argmax hits. */
static ForwardStats task_forward(const LossHead *h, const Model *m, const TrainBatch *tb, int regression,
                                 ForwardMode mode, uint64_t step_key) {
    head_forward(m, h->heads, h->acts->encoder_out, &tb->batch, mode == FORWARD_TRAIN, step_key);
    ForwardStats st = {0, regression ? 0 : tb->batch.B, 0};
    st.loss = head_loss(h->heads, &tb->targets, regression, &st.num_correct);
    return st;
}

static ForwardStats classification_forward(const LossHead *h, const Model *m, const TrainBatch *tb,
                                           ForwardMode mode, uint64_t step_key) {
    return task_forward(h, m, tb, 0, mode, step_key);
}

static ForwardStats regression_forward(const LossHead *h, const Model *m, const TrainBatch *tb, ForwardMode mode,
                                       uint64_t step_key) {
    return task_forward(h, m, tb, 1, mode, step_key);
}

static void classification_backward(const LossHead *h, Model *m, const TrainBatch *tb, float loss_scale) {
    head_backward(m, h->heads, h->acts->encoder_out, &tb->targets, 0, loss_scale, h->acts->d_hidden_a);
}

static void regression_backward(const LossHead *h, Model *m, const TrainBatch *tb, float loss_scale) {
    head_backward(m, h->heads, h->acts->encoder_out, &tb->targets, 1, loss_scale, h->acts->d_hidden_a);
}

/* tagging: the sequence count replaced by the labelled positions' */
static ForwardStats tagging_forward(const LossHead *h, const Model *m, const TrainBatch *tb, ForwardMode mode,
                                    uint64_t step_key) {
    ForwardStats st = task_forward(h, m, tb, 0, mode, step_key);
    st.num_predicted = 0; /* token_labels [B, L]: the grid of the padded layouts in every layout */
    for (int n = 0; n < tb->batch.B * tb->batch.L; n++)
        st.num_predicted += tb->targets.token_labels[n] != IGNORE_LABEL;
    return st;
}

static const LossHeadOps MLM = {"mlm", mlm_forward, mlm_backward, 1};
static const LossHeadOps CLASSIFICATION = {"classification", classification_forward, classification_backward, 0};
static const LossHeadOps REGRESSION = {"regression", regression_forward, regression_backward, 0};
/* the span head's loss and backward are head_loss / head_backward's for a span model */
static const LossHeadOps SPAN = {"span", classification_forward, classification_backward, 0};
static const LossHeadOps TAGGING = {"tagging", tagging_forward, classification_backward, 0};

LossHead loss_head_mlm(Activations *acts) { return (LossHead){&MLM, acts, NULL}; }

LossHead loss_head_task(const Model *m, Activations *acts, HeadBuffers *heads, int regression) {
    RP_CHECK(!m->heads.mlm && (m->heads.span || m->heads.num_labels > 0),
             "internal: a task loss needs a model with a span or classifier head");
    return (LossHead){m->heads.span      ? &SPAN
                      : !m->heads.pooler ? &TAGGING
                      : regression       ? &REGRESSION
                                         : &CLASSIFICATION,
                      acts, heads};
}

ForwardStats loss_forward(const Model *m, LossHead *h, const TrainBatch *tb, ForwardMode mode, uint64_t step_key) {
    model_encode(m, h->acts, &tb->batch, mode, step_key);
    return h->ops->forward(h, m, tb, mode, step_key);
}

void loss_backward(Model *m, LossHead *h, const TrainBatch *tb, float loss_scale) {
    h->ops->backward(h, m, tb, loss_scale);
    model_encode_backward(m, h->acts, &tb->batch);
}

double loss_flops(const Model *m, const LossHead *h, const TrainBatch *tb, const ForwardStats *st) {
    return model_flops_of_batch(&m->cfg, &tb->batch, h->ops->head_flops ? st->num_predicted : 0);
}
