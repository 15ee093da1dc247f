/* The loss API over the MLM and task heads (loss.h). */
#include "train/model/loss.h"

#include "core/common.h"
#include "layers/layers.h"

LossHead loss_head_mlm(Activations *acts) { return (LossHead){LOSS_MLM, acts, NULL}; }

LossHead loss_head_task(const Model *m, Activations *acts, HeadBuffers *heads, int regression) {
    RP_CHECK(!m->heads.mlm && (m->heads.span || m->heads.num_labels > 0),
             "internal: a task loss needs a model with a span or classifier head");
    LossKind kind = m->heads.span             ? LOSS_SPAN
                    : !m->heads.pooler        ? LOSS_TAGGING
                    : regression              ? LOSS_REGRESSION
                                              : LOSS_CLASSIFICATION;
    return (LossHead){kind, acts, heads};
}

ForwardStats loss_forward(const Model *m, LossHead *h, const TrainBatch *tb, ForwardMode mode, uint64_t step_key) {
    if (h->kind == LOSS_MLM)
        return model_mlm_forward(m, h->acts, &tb->batch, mode, step_key, NULL);
    const float *hidden = model_encode(m, h->acts, &tb->batch, mode, step_key);
    head_forward(m, h->heads, hidden, &tb->batch, mode == FORWARD_TRAIN, step_key);
    ForwardStats st = {0, h->kind == LOSS_REGRESSION ? 0 : tb->batch.B, 0};
    if (h->kind == LOSS_TAGGING) { /* the labelled positions */
        st.num_predicted = 0;
        for (int n = 0; n < tb->batch.B * tb->batch.L; n++)
            st.num_predicted += tb->targets.token_labels[n] != IGNORE_LABEL;
    }
    st.loss = head_loss(h->heads, &tb->targets, h->kind == LOSS_REGRESSION, &st.num_correct);
    return st;
}

void loss_backward(Model *m, LossHead *h, const TrainBatch *tb, float loss_scale) {
    if (h->kind == LOSS_MLM) {
        model_mlm_backward(m, h->acts, &tb->batch, loss_scale);
        return;
    }
    head_backward(m, h->heads, h->acts->encoder_out, &tb->targets, h->kind == LOSS_REGRESSION, loss_scale,
                  h->acts->d_hidden_a);
    model_encode_backward(m, h->acts, &tb->batch);
}

double loss_flops(const Model *m, const LossHead *h, const TrainBatch *tb, const ForwardStats *st) {
    return model_flops_per_step(&m->cfg, tb->batch.B, tb->batch.L, h->kind == LOSS_MLM ? st->num_predicted : 0);
}
