/* The BERT encoder with MLM head: parameter layout, activation layout, init, forward, backward.
 *
 * Parameters, gradients (and the optimizer's moments) are each one contiguous float block laid
 * out from the config; the ParamTable names every tensor with its HuggingFace BertForMaskedLM
 * state_dict key ('.' -> '/') for checkpoints. Activations for batches of at most [B, L] and at
 * most M labelled positions are one more block, laid out once: a batch of shape [b <= B, l <= L]
 * (fine-tuning pads each batch to its longest sequence only) runs in a prefix of every buffer,
 * indexed by its own b and l. Nothing is allocated in the step loop. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/gemm.h"
#include "train/config/config.h"
#include "core/param_table.h"
#include "layers/encoder.h"

#define MODEL_MAX_LAYERS CONFIG_MAX_LAYERS
/* Which output heads the model carries besides the encoder. Pretraining uses the MLM head;
 * fine-tuning drops it and adds the pooler with a classifier, or the span (QA) head. */
typedef struct {
    int mlm;        /* cls/predictions/... (decoder tied to the word embeddings) */
    int pooler;     /* bert/pooler/dense: tanh(W h_[CLS] + b) */
    int num_labels; /* classifier/{weight,bias} [num_labels, H] after the pooler; 0 = none */
    int span;       /* qa_outputs/{weight,bias} [2, H]: start/end logits per token */
} ModelHeads;

static inline ModelHeads heads_mlm(void) { return (ModelHeads){1, 0, 0, 0}; }

/* Pointers to every tensor of one parameter-shaped block (parameters, gradients, moments). */
typedef struct {
    float *word_emb, *pos_emb, *type_emb; /* [V,H], [P,H] or NULL, [T,H] */
    float *emb_norm_g, *emb_norm_b;       /* [H] */
    float *relative_attention_bias;       /* t5: [t5_num_buckets, heads], the one table every
                                           * layer's position_table points to; else NULL */
    LayerParams layer[MODEL_MAX_LAYERS];
    float *final_norm_g, *final_norm_b;   /* Pre-LN only, else NULL */
    HeadParams head;                      /* MLM head (all NULL without it) */
    float *pooler_w, *pooler_b;           /* [H, H], [H] or NULL */
    float *classifier_w, *classifier_b;   /* [num_labels, H], [num_labels] or NULL */
    float *span_w, *span_b;               /* [2, H], [2] or NULL */
} ModelParams;

typedef struct {
    ModelConfig cfg;
    ModelHeads heads;
    ParamTable table;
    float *params, *grads; /* table.block_floats each */
    ModelParams p, g;
} Model;

/* Two layouts. Padded (offsets NULL): B sequences padded to L, [B, L] each, attention_mask 0 on
 * padding. Unpadded (offsets [B+1]): sequence b is rows offsets[b] .. offsets[b+1]-1 of
 * input_ids, token_type_ids, labels ([T] each, T = offsets[B] real tokens, offsets[0] = 0), of
 * its own length 0..L (0: a padding row, no rows at all); attention_mask is unused; L (at least the longest) is the padded length
 * whose numbering the dropout masks keep: row offsets[b] + i draws the masks of row b*L + i of
 * the padded [B, L] batch, so the two layouts of one batch with L = its longest draw the same. */
typedef struct {
    int B, L;
    const int *input_ids, *token_type_ids, *attention_mask, *labels; /* [B, L] or [T] each */
    const int *offsets; /* [B+1] unpadded, or NULL */
} Batch;

/* Rows of a batch: B*L padded, T unpadded. */
static inline int batch_rows(const Batch *b) { return b->offsets ? b->offsets[b->B] : b->B * b->L; }
/* Row of sequence i's first token (its [CLS]). */
static inline int batch_first_row(const Batch *b, int i) { return b->offsets ? b->offsets[i] : i * b->L; }
/* Length of sequence i's rows in the batch (its real length unpadded, L padded). */
static inline int batch_seq_rows(const Batch *b, int i) {
    return b->offsets ? b->offsets[i + 1] - b->offsets[i] : b->L;
}

/* What a forward pass is for (the mode of model_encode, model_mlm_forward): dropout
 * (keyed by step_key) or not, and whether a backward follows. FORWARD_EVAL skips what only the
 * backward needs (GELU's slopes); its outputs are bit-identical to the same forward keeping them,
 * and a backward after it is refused. */
typedef enum {
    FORWARD_EVAL = 0,      /* no dropout, no backward: evaluation, prediction */
    FORWARD_TRAIN = 1,     /* dropout, the backward follows: a training step */
    FORWARD_EVAL_GRAD = 2, /* no dropout, the backward follows: gradient dumps and checks */
} ForwardMode;

typedef struct {
    int B, L, max_predictions; /* largest shape the block was laid out for */
    int threads;               /* OpenMP threads the attention scratch was laid out for */
    size_t attn_scratch_floats; /* attention scratch: the most any shape [B, l <= L] needs */
    Arena arena;
    size_t step_floats; /* the arena's first step_floats floats hold one step's values only (dead
                         * between steps: the bf16 peak probe borrows them, train/loop/step.c) */
    int *rows;   /* [max_predictions] flat (b*L + l) indices of labelled positions */
    int *labels; /* [max_predictions] their labels */
    int *row_pos, *row_key; /* [B*L] an unpadded batch's rows: position in the sequence, and the
                             * row in the padded layout (b*L + position: the dropout numbering) */
    int num_predictions;
    float *emb_sum, *emb_out, *emb_mean, *emb_rstd;
    LayerActs layer[MODEL_MAX_LAYERS];
    float *final_out, *final_mean, *final_rstd; /* Pre-LN final norm */
    HeadActs head;
    LayerScratch scratch;
    PosTables positions; /* the scheme's length-only tables: built by the forward for its L
                          * (before the layers), read by every layer's forward and backward */
    AttnVarlenPlan varlen; /* an unpadded batch's attention scratch, planned at start-up for [B, L] */
    /* The precision of the model's matrix products, and everything that depends on it, owned
     * here alone: the product context, and in bf16 the weights' copy weights16 = bf16(m->params)
     * (one block laid out as params, registered with gemm; AdamW's update pass writes it, given
     * it by the training step; activations_refresh_weights after anything else wrote the weights)
     * and the feed-forward's bf16 activations (LayerActs.ffn_act16, LayerScratch.d_ffn16). */
    Precision precision;
    Gemm *gemm;
    bf16 *weights16; /* NULL in fp32 */
    float *d_hidden_a, *d_hidden_b; /* [N, H] */
    float *d_head;                  /* [2, max_predictions, H] */
    /* set by model_encode for the backward pass */
    ForwardMode mode; /* dropout on with FORWARD_TRAIN; nothing kept for a backward with FORWARD_EVAL */
    uint64_t step_key;
    const float *encoder_out;
} Activations;

typedef struct {
    float loss;
    int num_predicted, num_correct;
} ForwardStats;

/* Build the parameter table and allocate zeroed params and grads. */
void model_create(Model *m, const ModelConfig *cfg, ModelHeads heads);
/* Parameters only (grads NULL): forward passes, conversion; half the memory of model_create. */
void model_create_inference(Model *m, const ModelConfig *cfg, ModelHeads heads);
void model_free(Model *m);
/* Bind the pointers of a parameter-shaped block laid out by m->table. */
void model_bind(const Model *m, float *block, ModelParams *out);
/* normal(0, init_range) weights, zero biases, LayerNorm 1/0, method1/2 scalar tables 1.0. */
void model_init_weights(Model *m, uint64_t seed);
/* The settings of c's position scheme that apply to it, as the scheme names them (positions.h:
 * "k = 16", "32 buckets, max distance 128", "theta 10000"; "" for none and alibi). */
void model_position_settings(const ModelConfig *c, char *out, size_t size);
const ParamInfo *model_find_param(const Model *m, const char *name);

/* The one constructor of what runs a model: activations for batches of shape up to [B, L] with
 * at most max_predictions labelled positions, the product context in `precision` (bf16: oneDNN,
 * or the emulation under REALPOS_BF16_EMULATE=1, core/gemm.h) and in bf16 the weights' copy,
 * filled from m->params (initialised or loaded before). */
void activations_create(Activations *a, const Model *m, int B, int L, int max_predictions, Precision precision);
/* a->weights16 = bf16(m->params) (no-op in fp32): after anything but the optimizer wrote the
 * weights (a checkpoint load on resume). */
void activations_refresh_weights(Activations *a, const Model *m);
void activations_free(Activations *a);

/* Encoder only: embeddings and every layer (and the Pre-LN final norm). Returns the hidden
 * states [B*L, H] of the batch's own B and L (also a->encoder_out). Fatal if the batch does not
 * fit the layout (batch->B > a->B or batch->L > a->L). */
const float *model_encode(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                          uint64_t step_key);
/* Called by model_encode_observed after layer l's forward: its saved activations (probs
 * [B, heads, L, L], ...) and, with residual attention, the carried scores C_l [B, heads, L, L]
 * (NULL otherwise), which the next layer overwrites: copy what is kept. */
typedef void (*LayerObserver)(void *user, int layer, const LayerActs *acts, const float *carried);
/* model_encode that hands every layer to `observe` (e.g. `realpos attention` keeping the
 * carried scores); model_encode is this with no observer. */
const float *model_encode_observed(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                                   uint64_t step_key, LayerObserver observe, void *user);
/* Backward through the encoder from d_hidden = a->d_hidden_a [B*L, H] (filled by the caller's
 * head; clobbered), accumulating into m->grads. Fatal after a FORWARD_EVAL forward. */
void model_encode_backward(Model *m, Activations *a, const Batch *batch);

/* Encoder + MLM head: the mean MLM loss of a batch; mode as ForwardMode (FORWARD_TRAIN: dropout keyed by
 * step_key). Fatal if the batch does not fit the activation layout. If logits_copy is non-NULL the [M, V] logits of the
 * labelled positions (row-major (b, l) order) are copied there. */
ForwardStats model_mlm_forward(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                               uint64_t step_key, float *logits_copy);
/* The two halves of each: the MLM head and its loss on the encoder's output of the last
 * model_encode (in the same mode), and the head's backward into a->d_hidden_a (overwritten; the
 * encoder's backward follows). The MLM LossHead (train/model/loss.h) is these. */
ForwardStats model_mlm_head_forward(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                                    float *logits_copy);
void model_mlm_head_backward(Model *m, Activations *a, const Batch *batch, float loss_scale);
/* Gradients of the last model_mlm_forward's loss, accumulated (+=) into m->grads (scaled by loss_scale,
 * e.g. 1/grad_accum_steps). Overwrites a->head.logits. Fatal after a FORWARD_EVAL forward. */
void model_mlm_backward(Model *m, Activations *a, const Batch *batch, float loss_scale);
/* Model FLOPs of one forward+backward for a batch shape (6 x params-in-matmuls x tokens plus
 * attention), for MFU/GFLOP/s reports. */
double model_flops_per_step(const ModelConfig *cfg, int B, int L, int num_predictions);
/* The same for a batch of either layout: its rows, and attention's per-sequence L_b^2 terms. */
double model_flops_of_batch(const ModelConfig *cfg, const Batch *batch, int num_predictions);
