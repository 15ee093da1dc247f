/* The token classification head (token_head.h). */
#include "train/model/token_head.h"

#include "core/common.h"
#include "layers/layers.h"

void token_head_buffers(HeadBuffers *hb, size_t N) {
    size_t NH = N * (size_t)hb->H, NC = N * (size_t)hb->C;
    hb->dropped = xalloc_floats(NH);
    hb->d_z = xalloc_floats(NH);
    hb->logits = xalloc_floats(NC);
    hb->probs = xalloc_floats(NC);
    hb->d_logits = xalloc_floats(NC);
}

void token_head_forward(const Model *m, HeadBuffers *hb, const float *hidden, int N) {
    size_t NH = (size_t)N * hb->H;
    dropout_forward(hb->dropped, hidden, NH, hb->training ? m->cfg.hidden_dropout : 0.0f, hb->dropout_key);
    linear_forward(NULL, hb->logits, hb->dropped, m->p.classifier_w, m->p.classifier_b, N, hb->H, hb->C);
}

float token_head_loss(HeadBuffers *hb, const int *labels, int N, int *num_correct) {
    return crossentropy_forward(hb->probs, num_correct, hb->logits, labels, N, hb->C);
}

void token_head_backward(Model *m, HeadBuffers *hb, const float *hidden, const int *labels, int N, float loss_scale,
                         float *d_hidden) {
    (void)hidden;
    int H = hb->H, C = hb->C;
    crossentropy_backward(hb->d_logits, hb->probs, labels, N, C, loss_scale);
    linear_backward(NULL, hb->d_z, m->g.classifier_w, m->g.classifier_b, hb->d_logits, hb->dropped, m->p.classifier_w,
                    N, H, C);
    dropout_backward(d_hidden, hb->d_z, (size_t)N * H, hb->training ? m->cfg.hidden_dropout : 0.0f,
                     hb->dropout_key);
}
