/* The token classification head (tagging), BertForTokenClassification's (task_heads.h):
 *   z = dropout(h) [N, H], logits = z W_c^T + b_c [N, C], loss = mean CE over labelled positions.
 * Called by task_heads.c when the model has a classifier and no pooler. */
#pragma once
#include "train/model/task_heads.h"

/* Buffers of the token head for [N = B*L] positions: dropped, d_z [N, H]; logits, probs, d_logits [N, C]. */
void token_head_buffers(HeadBuffers *hb, size_t N);
void token_head_forward(const Model *m, HeadBuffers *hb, const float *hidden, int N);
/* Mean CE over the positions whose label is not IGNORE_LABEL; *num_correct: argmax hits among them. */
float token_head_loss(HeadBuffers *hb, const int *labels, int N, int *num_correct);
/* d(loss_scale * loss)/dh into d_hidden [N, H] (overwrites); classifier gradients +=. */
void token_head_backward(Model *m, HeadBuffers *hb, const float *hidden, const int *labels, int N, float loss_scale,
                         float *d_hidden);
