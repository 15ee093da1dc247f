/* Activation layout and the whole-model forward and backward passes. */
#include <limits.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/model/model.h"

/* Dropout sites: one key per (step, site); site ids are fixed so masks are reproducible. */
enum { SITE_EMBEDDINGS = 1, SITE_LAYER_BASE = 16 };

static uint64_t site_key(uint64_t step_key, uint64_t site) { return hash64(step_key ^ hash64(site)); }

static LayerKeys layer_keys(uint64_t step_key, int l) {
    uint64_t base = SITE_LAYER_BASE + 4 * (uint64_t)l;
    return (LayerKeys){site_key(step_key, base), site_key(step_key, base + 1),
                       site_key(step_key, base + 2)};
}

/* Shapes of a batch [B, L] that fits the layout (B <= a->B, L <= a->L): every kernel indexes by
 * these, so a shorter batch uses a prefix of each activation buffer. */
static AttnShape attn_shape(const ModelConfig *c, const Activations *a, int B, int L, int l, int training) {
    return (AttnShape){
        .B = B, .L = L, .H = c->hidden_size, .num_heads = c->num_heads,
        .rel = c->relative_position, .rel_k = c->relative_k,
        .t5_num_buckets = c->t5_num_buckets, .t5_max_distance = c->t5_max_distance,
        .rope_theta = c->rope_theta,
        .residual = c->residual_attention, .first_layer = l == 0,
        .carried_scale = c->residual_attention_mean ? 1.0f / (float)(l + 1) : 1.0f,
        .dropout = training ? c->attention_dropout : 0.0f,
        .threads = a->threads,
        .tables = &a->positions,
        .varlen = &a->varlen,
        .gemm = a->gemm,
    };
}

/* The shape of layer l for a forward in `mode`, or for its backward (the forward's mode). */
static LayerShape layer_shape(const ModelConfig *c, const Activations *a, const Batch *batch, int l,
                              ForwardMode mode) {
    const int training = mode == FORWARD_TRAIN;
    LayerShape shape = {
        .N = batch_rows(batch), .H = c->hidden_size, .ffn_dim = c->intermediate_size,
        .pre_norm = c->norm == NORM_PRE, .eps = c->layer_norm_eps,
        .hidden_dropout = training ? c->hidden_dropout : 0.0f,
        .attn = attn_shape(c, a, batch->B, batch->L, l, training),
        .forward_only = mode == FORWARD_EVAL,
        .gemm = a->gemm,
    };
    if (batch->offsets) {
        shape.attn.seq_offsets = batch->offsets;
        shape.row_keys = a->row_key;
    }
    return shape;
}

/* An unpadded batch's offsets checked against the layout, and each row's position and padded row
 * (a->row_pos, a->row_key). */
static void lay_out_rows(Activations *a, const Batch *batch) {
    const int *off = batch->offsets;
    RP_CHECK(off[0] == 0, "unpadded batch: offsets start at %d, expected 0", off[0]);
    for (int b = 0; b < batch->B; b++) {
        const int len = off[b + 1] - off[b];
        RP_CHECK(len >= 0 && len <= batch->L, "unpadded batch: sequence %d has %d tokens, expected 0 "
                 "to %d", b, len, batch->L);
        for (int i = 0; i < len; i++) {
            a->row_pos[off[b] + i] = i;
            a->row_key[off[b] + i] = b * batch->L + i;
        }
    }
}

/* bf16 [count] from the arena (count / 2 floats, rounded up) */
static bf16 *take_bf16(Arena *ar, size_t count) { return (bf16 *)arena_take(ar, (count + 1) / 2); }

/* Lay out every activation buffer; with a measuring arena only the size is computed. */
static void layout_activations(Activations *a, const ModelConfig *c, Precision precision) {
    Arena *ar = &a->arena;
    size_t B = (size_t)a->B, L = (size_t)a->L, N = B * L, M = (size_t)a->max_predictions;
    size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, V = (size_t)c->vocab_size;
    size_t scores = B * (size_t)c->num_heads * L * L;
    a->emb_sum = arena_take(ar, N * H);
    a->emb_out = arena_take(ar, N * H);
    a->emb_mean = arena_take(ar, N);
    a->emb_rstd = arena_take(ar, N);
    for (int l = 0; l < c->num_layers; l++) {
        LayerActs *la = &a->layer[l];
        la->norm1 = arena_take(ar, N * H);
        la->norm1_mean = arena_take(ar, N);
        la->norm1_rstd = arena_take(ar, N);
        /* Q|K|V: bf16 only in bf16 (attention's products read nothing else; the projection's fp32
         * output goes through the scratch d_qkv) */
        la->qkv = precision == PRECISION_BF16 ? NULL : arena_take(ar, N * 3 * H);
        la->qkv16 = precision == PRECISION_BF16 ? take_bf16(ar, N * 3 * H) : NULL;
        la->probs = arena_take(ar, scores);
        la->raw_scores = pos_scheme(c->relative_position)->qk == POS_QK_RAW ? arena_take(ar, scores) : NULL;
        /* ctx: bf16 only in bf16 (the output projection's products read nothing else) */
        la->ctx = precision == PRECISION_BF16 ? NULL : arena_take(ar, N * H);
        la->ctx16 = precision == PRECISION_BF16 ? take_bf16(ar, N * H) : NULL;
        la->sum1 = arena_take(ar, N * H);
        la->norm2 = arena_take(ar, N * H);
        la->norm2_mean = arena_take(ar, N);
        la->norm2_rstd = arena_take(ar, N);
        /* GELU's output and slope: bf16 only in bf16 (the feed-forward's second linear and GELU's
         * backward read nothing else) */
        la->ffn_slope = precision == PRECISION_BF16 ? NULL : arena_take(ar, N * I);
        la->ffn_act = precision == PRECISION_BF16 ? NULL : arena_take(ar, N * I);
        la->sum2 = arena_take(ar, N * H);
        la->ffn_act16 = precision == PRECISION_BF16 ? take_bf16(ar, N * I) : NULL;
        la->ffn_slope16 = precision == PRECISION_BF16 ? take_bf16(ar, N * I) : NULL;
    }
    if (c->norm == NORM_PRE) {
        a->final_out = arena_take(ar, N * H);
        a->final_mean = arena_take(ar, N);
        a->final_rstd = arena_take(ar, N);
    }
    HeadActs *h = &a->head;
    h->gathered = arena_take(ar, M * H);
    h->slope = arena_take(ar, M * H);
    h->act = arena_take(ar, M * H);
    h->out = arena_take(ar, M * H);
    h->mean = arena_take(ar, M);
    h->rstd = arena_take(ar, M);
    h->logits = arena_take(ar, M * V); /* M = 0 without the MLM head */
    LayerScratch *s = &a->scratch;
    s->proj = arena_take(ar, N * H);
    s->d_a = arena_take(ar, N * H);
    s->d_b = arena_take(ar, N * H);
    s->d_ffn = arena_take(ar, N * I);
    s->d_ffn16 = precision == PRECISION_BF16 ? take_bf16(ar, N * I) : NULL;
    s->d_qkv = arena_take(ar, N * 3 * H);
    s->d_ctx = arena_take(ar, N * H);
    s->attn = arena_take(ar, a->attn_scratch_floats);
    a->step_floats = ar->used; /* everything above is rewritten by every forward and backward */
    const AttnShape longest = attn_shape(c, a, a->B, a->L, 0, 0);
    pos_tables_lay_out(&a->positions, &longest, ar);
    s->carried = c->residual_attention ? arena_take(ar, scores) : NULL;
    s->d_carried = c->residual_attention ? arena_take(ar, scores) : NULL;
    a->d_hidden_a = arena_take(ar, N * H);
    a->d_hidden_b = arena_take(ar, N * H);
    a->d_head = arena_take(ar, 2 * M * H);
}

void activations_create(Activations *a, const Model *m, int B, int L, int max_predictions, Precision precision) {
    const ModelConfig *c = &m->cfg;
    RP_CHECK(B >= 1 && L >= 1, "batch shape must be positive, got [%d, %d]", B, L);
    /* Row counts are ints in the layer and BLAS interfaces: tokens B*L, score matrices
     * B*heads, and their elements' row-major offsets are size_t. */
    RP_CHECK((int64_t)B * L <= INT_MAX && (int64_t)B * c->num_heads <= INT_MAX,
             "batch of %d sequences of %d tokens with %d heads: expected at most %d tokens and score "
             "matrices per batch (lower the batch size or sequence length)", B, L, c->num_heads, INT_MAX);
    RP_CHECK(!c->absolute_position || L <= c->max_position,
             "sequence length %d exceeds model.max_position = %d (absolute positions)", L, c->max_position);
    /* Each dropout site draws its mask over 32-bit element indices (core/rng.h); the largest are
     * attention's B*heads*L^2 scores and the hidden states' B*L*H. Refused here, before the
     * activations of such a shape are allocated, rather than at the first forward. */
    const uint64_t scores = (uint64_t)B * (uint64_t)c->num_heads * (uint64_t)L * (uint64_t)L;
    RP_CHECK(c->attention_dropout == 0.0f || dropout_indices_fit(scores),
             "batch of %d sequences of %d tokens with %d heads: %llu attention scores, over the 2^32 one "
             "dropout mask indexes (model.attention_dropout = %g): lower the batch size or sequence length, "
             "or set model.attention_dropout = 0", B, L, c->num_heads, (unsigned long long)scores,
             (double)c->attention_dropout);
    const uint64_t hidden = (uint64_t)B * (uint64_t)L * (uint64_t)c->hidden_size;
    RP_CHECK(c->hidden_dropout == 0.0f || dropout_indices_fit(hidden),
             "batch of %d sequences of %d tokens at hidden size %d: %llu hidden values, over the 2^32 one "
             "dropout mask indexes (model.hidden_dropout = %g): lower the batch size or sequence length, or "
             "set model.hidden_dropout = 0", B, L, c->hidden_size, (unsigned long long)hidden,
             (double)c->hidden_dropout);
    memset(a, 0, sizeof *a);
    a->B = B;
    a->L = L;
    a->max_predictions = max_predictions < 0 ? 0 : max_predictions;
    a->threads = omp_get_max_threads();
    a->precision = precision;
    /* bf16: one staged operand (a gradient both backward products read: d_qkv [N, 3H], the
     * projections' [N, H]; the decoder's d_logits [M, V] is converted in place) and two converted
     * activations (the layer norms' outputs [N, H], the head's [M, H]); GELU's output and gradient
     * [N, I], Q|K|V and ctx are in bf16 already, the weights in their copy */
    const size_t N = (size_t)B * (size_t)L, H = (size_t)c->hidden_size, M = (size_t)a->max_predictions;
    a->gemm = gemm_create(precision, gemm_host_backend(), N * 3 * H, (N > M ? N : M) * H);
    if (precision == PRECISION_BF16) /* the per-(b,h) attention products, one lane a thread */
        gemm_reserve_lanes(a->gemm, a->threads);
    /* The attention scratch of a shape [B, l] need not grow with l (its blocking depends on l):
     * lay out the largest over every l <= L, so any batch that fits the layout has room. */
    for (int l = 1; l <= L; l++) {
        AttnShape shape = attn_shape(c, a, B, l, 0, 1);
        size_t floats = attention_scratch_floats(&shape);
        a->attn_scratch_floats = floats > a->attn_scratch_floats ? floats : a->attn_scratch_floats;
    }
    /* and an unpadded batch's (attention_varlen.c: per-thread scratch and per-sequence partials,
     * planned here once for every call; its size depends on B and L only, not on the offsets,
     * which are not read here) */
    const int no_offsets[1] = {0};
    AttnShape unpadded = attn_shape(c, a, B, L, 0, 1);
    unpadded.seq_offsets = no_offsets;
    a->varlen = attn_varlen_plan(&unpadded);
    const size_t varlen = attention_scratch_floats(&unpadded);
    a->attn_scratch_floats = varlen > a->attn_scratch_floats ? varlen : a->attn_scratch_floats;
    a->arena = arena_measuring();
    layout_activations(a, c, precision);
    arena_allocate(&a->arena, a->arena.used,
                   "the activations of batches of shape [batch size, sequence length] (train.batch_size or "
                   "task.batch_size, data.max_seq_len or task.max_seq_len) on this model: make them smaller");
    layout_activations(a, c, precision);
    if (precision == PRECISION_BF16) {
        a->weights16 = (bf16 *)xalloc_floats_for((m->table.block_floats + 1) / 2,
                                                 "the bf16 copy of the parameters (train.precision = bf16)");
        activations_refresh_weights(a, m);
        gemm_set_weights(a->gemm, m->params, m->table.block_floats, a->weights16);
    }
    a->rows = xcalloc((size_t)a->max_predictions + 1, sizeof(int));
    a->labels = xcalloc((size_t)a->max_predictions + 1, sizeof(int));
    a->row_pos = xcalloc(N, sizeof(int));
    a->row_key = xcalloc(N, sizeof(int));
}

void activations_refresh_weights(Activations *a, const Model *m) {
    if (a->weights16)
        bf16_convert_floats(a->weights16, m->params, m->table.block_floats);
}

void activations_free(Activations *a) {
    gemm_free(a->gemm);
    free(a->weights16);
    arena_free(&a->arena);
    free(a->rows);
    free(a->labels);
    free(a->row_pos);
    free(a->row_key);
    memset(a, 0, sizeof *a);
}

static const float *layer_output(const ModelConfig *c, const Activations *a, int l) {
    return c->norm == NORM_PRE ? a->layer[l].sum2 : a->layer[l].norm2;
}

const float *model_encode(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                          uint64_t step_key) {
    return model_encode_observed(m, a, batch, mode, step_key, NULL, NULL);
}

const float *model_encode_observed(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                                   uint64_t step_key, LayerObserver observe, void *user) {
    const ModelConfig *c = &m->cfg;
    const ModelParams *p = &m->p;
    int B = batch->B, L = batch->L, N = batch_rows(batch), H = c->hidden_size;
    RP_CHECK(B >= 1 && L >= 1 && B <= a->B && L <= a->L,
             "batch of shape [%d, %d] does not fit the activation layout [%d, %d]", B, L, a->B, a->L);
    const int *positions = NULL, *row_keys = NULL;
    if (batch->offsets) {
        lay_out_rows(a, batch);
        positions = a->row_pos, row_keys = a->row_key;
    }
    RP_CHECK(mode == FORWARD_EVAL || mode == FORWARD_TRAIN || mode == FORWARD_EVAL_GRAD,
             "internal: forward mode %d", (int)mode);
    a->mode = mode;
    a->step_key = step_key;
    float emb_drop = mode == FORWARD_TRAIN ? c->hidden_dropout : 0.0f;
    embedding_forward_at(a->emb_sum, batch->input_ids, batch->token_type_ids, p->word_emb, p->type_emb,
                         p->pos_emb, N, L, positions, H);
    layernorm_forward(a->emb_out, a->emb_mean, a->emb_rstd, a->emb_sum, p->emb_norm_g, p->emb_norm_b,
                      N, H, c->layer_norm_eps);
    dropout_rows(a->emb_out, a->emb_out, N, H, emb_drop, site_key(step_key, SITE_EMBEDDINGS), row_keys);

    /* once per step and length: every layer's forward and backward read them */
    const AttnShape longest = attn_shape(c, a, B, L, 0, mode == FORWARD_TRAIN);
    pos_tables_build(&a->positions, &longest, p->relative_attention_bias);
    const float *x = a->emb_out;
    for (int l = 0; l < c->num_layers; l++) {
        LayerShape shape = layer_shape(c, a, batch, l, mode);
        x = encoder_layer_forward(&a->layer[l], &a->scratch, x, &p->layer[l],
                                  batch->offsets ? NULL : batch->attention_mask,
                                  &shape, layer_keys(step_key, l));
        if (observe)
            observe(user, l, &a->layer[l], c->residual_attention ? a->scratch.carried : NULL);
    }
    if (c->norm == NORM_PRE) {
        layernorm_forward(a->final_out, a->final_mean, a->final_rstd, x, p->final_norm_g,
                          p->final_norm_b, N, H, c->layer_norm_eps);
        x = a->final_out;
    }
    a->encoder_out = x;
    return x;
}

ForwardStats model_mlm_head_forward(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                                    float *logits_copy) {
    const ModelConfig *c = &m->cfg;
    int N = batch_rows(batch), H = c->hidden_size, V = c->vocab_size;
    RP_CHECK(m->heads.mlm, "internal: the MLM loss needs the MLM head");
    RP_CHECK(a->encoder_out && a->mode == mode, "internal: the MLM head runs on the encoder's output of its forward");
    int M = 0;
    for (int n = 0; n < N; n++) {
        if (batch->labels[n] == IGNORE_LABEL)
            continue;
        RP_CHECK(M < a->max_predictions, "batch has more than %d labelled positions", a->max_predictions);
        a->rows[M] = n;
        a->labels[M++] = batch->labels[n];
    }
    a->num_predictions = M;
    ForwardStats stats = {0, M, 0};
    if (M == 0)
        return stats;
    mlm_head_forward(a->gemm, &a->head, a->encoder_out, a->rows, M, &m->p.head, m->p.word_emb, H, V,
                     c->layer_norm_eps, mode == FORWARD_EVAL);
    if (logits_copy)
        memcpy(logits_copy, a->head.logits, sizeof(float) * (size_t)M * V);
    stats.loss = crossentropy_forward(a->head.logits, &stats.num_correct, a->head.logits, a->labels, M, V);
    return stats;
}

ForwardStats model_mlm_forward(const Model *m, Activations *a, const Batch *batch, ForwardMode mode,
                               uint64_t step_key, float *logits_copy) {
    model_encode(m, a, batch, mode, step_key);
    return model_mlm_head_forward(m, a, batch, mode, logits_copy);
}

void model_encode_backward(Model *m, Activations *a, const Batch *batch) {
    const ModelConfig *c = &m->cfg;
    const ModelParams *p = &m->p;
    ModelParams *g = &m->g;
    int B = batch->B, L = batch->L, N = batch_rows(batch), H = c->hidden_size;
    const int *positions = batch->offsets ? a->row_pos : NULL, *row_keys = batch->offsets ? a->row_key : NULL;
    RP_CHECK(a->mode != FORWARD_EVAL, "internal: model_encode_backward after a FORWARD_EVAL forward (it kept "
             "nothing for a backward: run the forward with FORWARD_TRAIN or FORWARD_EVAL_GRAD)");
    float *d_out = a->d_hidden_a, *d_in = a->d_hidden_b;
    if (c->norm == NORM_PRE)
        layernorm_backward(d_out, g->final_norm_g, g->final_norm_b, d_out,
                           layer_output(c, a, c->num_layers - 1), p->final_norm_g, a->final_mean,
                           a->final_rstd, N, H);
    if (c->residual_attention)
        memset(a->scratch.d_carried, 0, sizeof(float) * (size_t)B * c->num_heads * L * L);
    for (int l = c->num_layers - 1; l >= 0; l--) {
        LayerShape shape = layer_shape(c, a, batch, l, a->mode);
        const float *x = l ? layer_output(c, a, l - 1) : a->emb_out;
        encoder_layer_backward(d_in, d_out, &g->layer[l], &a->scratch, x, &a->layer[l],
                               &p->layer[l], &shape, layer_keys(a->step_key, l));
        float *t = d_out;
        d_out = d_in;
        d_in = t;
    }
    float emb_drop = a->mode == FORWARD_TRAIN ? c->hidden_dropout : 0.0f;
    dropout_rows(d_out, d_out, N, H, emb_drop, site_key(a->step_key, SITE_EMBEDDINGS), row_keys);
    layernorm_backward(d_out, g->emb_norm_g, g->emb_norm_b, d_out, a->emb_sum, p->emb_norm_g,
                       a->emb_mean, a->emb_rstd, N, H);
    embedding_backward_at(g->word_emb, g->type_emb, g->pos_emb, d_out, batch->input_ids,
                          batch->token_type_ids, N, L, positions, H);
}

void model_mlm_head_backward(Model *m, Activations *a, const Batch *batch, float loss_scale) {
    const ModelConfig *c = &m->cfg;
    int N = batch_rows(batch), H = c->hidden_size, V = c->vocab_size, M = a->num_predictions;
    RP_CHECK(a->mode != FORWARD_EVAL, "internal: model_mlm_backward after a FORWARD_EVAL forward (it kept "
             "nothing for a backward: run the forward with FORWARD_TRAIN or FORWARD_EVAL_GRAD)");
    memset(a->d_hidden_a, 0, sizeof(float) * (size_t)N * H);
    if (M > 0) {
        /* the decoder bias's gradient in the pass that makes d_logits: one pass over [M, V], not two */
        HeadParams head_grads = m->g.head;
        head_grads.bias = NULL;
        crossentropy_backward_bias(a->head.logits, m->g.head.bias, a->head.logits, a->labels, M, V, loss_scale);
        mlm_head_backward(a->gemm, a->d_hidden_a, &head_grads, m->g.word_emb, a->head.logits, a->d_head, &a->head,
                          a->rows, M, &m->p.head, m->p.word_emb, H, V);
    }
}

void model_mlm_backward(Model *m, Activations *a, const Batch *batch, float loss_scale) {
    model_mlm_head_backward(m, a, batch, loss_scale);
    model_encode_backward(m, a, batch);
}

double model_flops_per_step(const ModelConfig *c, int B, int L, int num_predictions) {
    double H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, N = (double)B * L;
    double per_layer = 2.0 * N * (4.0 * H * H + 2.0 * H * I) + 2.0 * 2.0 * N * L * H;
    double head = 2.0 * num_predictions * (H * H + H * V);
    return 3.0 * (c->num_layers * per_layer + head);
}

double model_flops_of_batch(const ModelConfig *c, const Batch *batch, int num_predictions) {
    if (!batch->offsets)
        return model_flops_per_step(c, batch->B, batch->L, num_predictions);
    double H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, N = batch_rows(batch);
    double squares = 0.0; /* sum_b L_b^2: the attention products' rows x keys */
    for (int b = 0; b < batch->B; b++)
        squares += (double)batch_seq_rows(batch, b) * batch_seq_rows(batch, b);
    double per_layer = 2.0 * N * (4.0 * H * H + 2.0 * H * I) + 2.0 * 2.0 * squares * H;
    double head = 2.0 * num_predictions * (H * H + H * V);
    return 3.0 * (c->num_layers * per_layer + head);
}
