/* Shared by tests/train/model/test_unpadded.c (fp32) and test_unpadded_bf16.c: a batch of
 * sequences in both layouts (padded [B, Lmax] with a mask, unpadded [T] with offsets), the small
 * model both run, one training forward and backward of it in either layout, and the comparison
 * of the two results (loss, logits, encoder output, every parameter gradient). */
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/model/model.h"

enum { REL_K = 4, NSEQ = 5, L = 9, V = 40, H = 16 };
/* 1, 2, k-1, k+1 and L: shorter than, about and beyond the truncation distance k */
static const int lengths[NSEQ] = {1, 2, REL_K - 1, REL_K + 1, L};

typedef struct {
    int ids[NSEQ * L], types[NSEQ * L], mask[NSEQ * L], labels[NSEQ * L]; /* padded [B, Lmax] */
    int uids[NSEQ * L], utypes[NSEQ * L], ulabels[NSEQ * L], offsets[NSEQ + 1]; /* unpadded [T] */
    int longest; /* Lmax */
} Data;

/* sequences of lengths len[0..count) (each <= L), padded to their longest and unpadded */
static inline void make_data(Data *d, const int *len, int count, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    memset(d, 0, sizeof *d);
    for (int b = 0; b < count; b++)
        d->longest = len[b] > d->longest ? len[b] : d->longest;
    for (int b = 0; b < count; b++) {
        d->offsets[b + 1] = d->offsets[b] + len[b];
        for (int i = 0; i < d->longest; i++) {
            const int n = b * d->longest + i, real = i < len[b];
            d->ids[n] = real ? 5 + (int)rng_below(&rng, V - 5) : 0;
            d->types[n] = real && i >= len[b] / 2;
            d->mask[n] = real;
            d->labels[n] = real && (i % 3 == 1 || len[b] == 1) ? (int)rng_below(&rng, V) : IGNORE_LABEL;
            if (real) {
                const int u = d->offsets[b] + i;
                d->uids[u] = d->ids[n], d->utypes[u] = d->types[n], d->ulabels[u] = d->labels[n];
            }
        }
    }
}

static inline Batch batch_of(const Data *d, int count, int unpadded) {
    return unpadded ? (Batch){count, d->longest, d->uids, d->utypes, NULL, d->ulabels, d->offsets}
                    : (Batch){count, d->longest, d->ids, d->types, d->mask, d->labels, NULL};
}

/* largest |x - y| over the larger of largest |y| (n floats) and floor */
static inline double rel_diff_floor(const float *x, const float *y, size_t n, double floor) {
    double worst = 0.0, size = floor > 1e-30 ? floor : 1e-30;
    for (size_t e = 0; e < n; e++) {
        const double diff = fabs((double)x[e] - y[e]);
        worst = diff > worst || isnan(diff) ? diff : worst;
        size = fabs((double)y[e]) > size ? fabs((double)y[e]) : size;
    }
    return worst / size;
}

static inline double rel_diff(const float *x, const float *y, size_t n) { return rel_diff_floor(x, y, n, 0.0); }

static inline double max_abs(const float *x, size_t n) {
    double most = 0.0;
    for (size_t e = 0; e < n; e++)
        most = fabs((double)x[e]) > most ? fabs((double)x[e]) : most;
    return most;
}

/* 2 layers, 2 heads, H = 16, dropout 0.1; absolute positions only with no relative scheme */
static inline ModelConfig config_of(RelKind rel, int residual, NormKind norm) {
    return (ModelConfig){.hidden_size = H, .num_layers = 2, .num_heads = 2, .intermediate_size = 24,
                         .vocab_size = V, .max_position = 16, .type_vocab_size = 2,
                         .absolute_position = rel == REL_NONE, .norm = norm, .layer_norm_eps = 1e-12f,
                         .init_range = 0.3f, .seed = 5, .hidden_dropout = 0.1f, .attention_dropout = 0.1f,
                         .relative_position = rel, .relative_k = REL_K, .residual_attention = residual,
                         .t5_num_buckets = 8, .t5_max_distance = 6, .rope_theta = 10000.0f};
}

/* every parameter moved off its initial value (biases 0, LayerNorm 1, methods 1 and 2's weights 1
 * would hide terms) */
static inline void perturb(Model *m) {
    Rng rng;
    rng_seed(&rng, 23);
    for (size_t e = 0; e < m->table.block_floats; e++)
        m->params[e] += 0.2f * (rng_uniform(&rng) - 0.5f);
}

typedef struct {
    float loss;
    float *logits, *hidden, *grads; /* [M, V], [T, H] (real rows), the gradient block */
    int M;
    size_t grad_floats; /* of the gradient block */
} Result;

/* One training step's forward (dropout on, seed 0x5eed) and backward of the NSEQ sequences in one
 * layout (unpadded: offsets) at that precision, on the threads OpenMP has been given. */
static inline Result run_step(const ModelConfig *c, const Data *d, int unpadded, Precision precision) {
    Model m;
    Activations a;
    model_create(&m, c, heads_mlm());
    model_init_weights(&m, 11);
    perturb(&m);
    activations_create(&a, &m, NSEQ, L, NSEQ * L, precision);
    const Batch batch = batch_of(d, NSEQ, unpadded);
    const int T = d->offsets[NSEQ];
    Result r = {0};
    r.logits = xalloc_floats((size_t)NSEQ * L * V);
    ForwardStats st = model_mlm_forward(&m, &a, &batch, FORWARD_TRAIN, 0x5eed, r.logits);
    r.loss = st.loss;
    r.M = st.num_predicted;
    r.hidden = xalloc_floats((size_t)T * H);
    for (int b = 0; b < NSEQ; b++)
        memcpy(r.hidden + (size_t)d->offsets[b] * H,
               a.encoder_out + (size_t)(unpadded ? d->offsets[b] : b * d->longest) * H,
               sizeof(float) * (size_t)(d->offsets[b + 1] - d->offsets[b]) * H);
    model_mlm_backward(&m, &a, &batch, 1.0f);
    r.grads = xalloc_floats(m.table.block_floats);
    memcpy(r.grads, m.grads, sizeof(float) * m.table.block_floats);
    r.grad_floats = m.table.block_floats;
    activations_free(&a);
    model_free(&m);
    return r;
}

static inline void result_free(Result *r) { free(r->logits), free(r->hidden), free(r->grads); }

/* The key bias adds q_i.b_k to every key of row i alike: softmax cancels it, its gradient is 0 but
 * for rounding (none, t5, alibi, methods 1 and 2 at w = 1). KEY_BIAS_FLOORED measures it against
 * the value bias's gradient (the next tensor of the layer); KEY_BIAS_SKIPPED leaves it out. */
typedef enum { KEY_BIAS_FLOORED, KEY_BIAS_SKIPPED } KeyBiasRule;

typedef struct {
    double loss, logits, hidden, grads; /* relative errors; grads: the worst tensor's */
    double worst;                       /* the largest of the four (NaN if any is) */
    char worst_grad[PARAM_NAME_MAX];    /* that tensor's name */
} Errors;

/* u (unpadded) against p (padded) of model config c: the loss relative to p's, the logits and
 * encoder output relative to p's largest entry, each parameter gradient relative to its tensor's. */
static inline Errors compare_results(const ModelConfig *c, const Result *u, const Result *p, int T,
                                     KeyBiasRule key_bias_rule) {
    Errors r = {0};
    r.loss = fabs((double)u->loss - p->loss) / fabs((double)p->loss);
    r.logits = rel_diff(u->logits, p->logits, (size_t)p->M * V);
    r.hidden = rel_diff(u->hidden, p->hidden, (size_t)T * H);
    Model named;
    model_create_inference(&named, c, heads_mlm());
    for (int i = 0; i < named.table.count; i++) {
        const ParamInfo *pi = &named.table.items[i];
        const size_t len = strlen(pi->name);
        const int key_bias = len > 8 && strcmp(pi->name + len - 8, "key/bias") == 0;
        double floor = 0.0;
        if (key_bias && key_bias_rule == KEY_BIAS_SKIPPED)
            continue;
        if (key_bias) {
            char value[PARAM_NAME_MAX];
            snprintf(value, sizeof value, "%.*svalue/bias", (int)(len - 8), pi->name);
            const ParamInfo *v = model_find_param(&named, value);
            floor = max_abs(p->grads + v->offset, v->count);
        }
        const double e = rel_diff_floor(u->grads + pi->offset, p->grads + pi->offset, pi->count, floor);
        if (e > r.grads || isnan(e))
            r.grads = e, snprintf(r.worst_grad, sizeof r.worst_grad, "%s", pi->name);
    }
    model_free(&named);
    r.worst = r.loss > r.logits ? r.loss : r.logits;
    r.worst = r.hidden > r.worst ? r.hidden : r.worst;
    r.worst = r.grads > r.worst || isnan(r.grads) ? r.grads : r.worst;
    return r;
}
