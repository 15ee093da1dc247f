/* The BERT model's parameters: the layout of every tensor (encoder, MLM head, pooler and
 * classifier, span head) in one block, binding a block's pointers, and initialisation. The
 * activation layout and the forward and backward passes are in model_forward.c. */
#include "train/model/model.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/layers.h"

/* ---- parameter layout ---------------------------------------------------------------------
 * One walk over the model's tensors, in a fixed order, serves both to build the ParamTable
 * (with a measuring arena) and to bind pointers into a block laid out by that table (with a view
 * of the block, table == NULL). */
typedef struct {
    ParamTable *table;
    Arena arena;
} Layout;

static void record(Layout *lo, const char *name, int rows, int cols, size_t offset, int decay) {
    if (!lo->table)
        return;
    ParamTable *t = lo->table;
    t->items = realloc(t->items, sizeof(ParamInfo) * (size_t)(t->count + 1));
    RP_CHECK(t->items, "out of memory building the parameter table");
    ParamInfo *p = &t->items[t->count++];
    RP_CHECK(strlen(name) < PARAM_NAME_MAX, "internal: parameter name too long: %s", name);
    strcpy(p->name, name);
    p->rows = rows;
    p->cols = cols;
    p->offset = offset;
    p->count = (size_t)rows * (size_t)(cols ? cols : 1);
    p->decay = decay;
}

/* `n` tensors of the same shape placed back to back (so e.g. Q|K|V weights form one matrix). */
static float *place_group(Layout *lo, const char *const *names, int n, int rows, int cols, int decay) {
    size_t start = lo->arena.used, each = (size_t)rows * (size_t)(cols ? cols : 1);
    for (int i = 0; i < n; i++)
        record(lo, names[i], rows, cols, start + (size_t)i * each, decay);
    return arena_take(&lo->arena, each * (size_t)n); /* every tensor group 64-byte aligned */
}

static float *place(Layout *lo, const char *name, int rows, int cols, int decay) {
    return place_group(lo, &name, 1, rows, cols, decay);
}

static void layout_model(const ModelConfig *c, ModelHeads heads, Layout *lo, ModelParams *mp) {
    int H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int head_dim = H / c->num_heads;
    char n[3][PARAM_NAME_MAX];
    const char *names[3] = {n[0], n[1], n[2]};
    memset(mp, 0, sizeof *mp);
    mp->word_emb = place(lo, "bert/embeddings/word_embeddings/weight", V, H, 1);
    if (c->absolute_position)
        mp->pos_emb = place(lo, "bert/embeddings/position_embeddings/weight", c->max_position, H, 1);
    mp->type_emb = place(lo, "bert/embeddings/token_type_embeddings/weight", c->type_vocab_size, H, 1);
    mp->emb_norm_g = place(lo, "bert/embeddings/LayerNorm/weight", H, 0, 0);
    mp->emb_norm_b = place(lo, "bert/embeddings/LayerNorm/bias", H, 0, 0);
    /* the position scheme's table: one for the encoder (its gradient sums the layers'), or each
     * layer's (below) */
    const PosScheme *scheme = pos_scheme(c->relative_position);
    int table_rows, table_cols;
    pos_table_shape(c->relative_position,
                    &(PosDims){.rel_k = c->relative_k, .head_dim = head_dim, .heads = c->num_heads,
                               .t5_num_buckets = c->t5_num_buckets},
                    &table_rows, &table_cols);
    if (scheme->table_scope == POS_TABLE_MODEL)
        mp->relative_attention_bias = place(lo, scheme->table_name, table_rows, table_cols, 1);
    for (int l = 0; l < c->num_layers; l++) {
        LayerParams *p = &mp->layer[l];
        char pre[32];
        snprintf(pre, sizeof pre, "bert/encoder/layer/%d/", l);
#define NAME(i, suffix) snprintf(n[i], PARAM_NAME_MAX, "%s%s", pre, suffix)
        NAME(0, "attention/self/query/weight"), NAME(1, "attention/self/key/weight"),
            NAME(2, "attention/self/value/weight");
        p->qkv_w = place_group(lo, names, 3, H, H, 1);
        NAME(0, "attention/self/query/bias"), NAME(1, "attention/self/key/bias"),
            NAME(2, "attention/self/value/bias");
        p->qkv_b = place_group(lo, names, 3, H, 0, 0);
        p->position_table = mp->relative_attention_bias;
        if (scheme->table_scope == POS_TABLE_LAYER) {
            NAME(0, scheme->table_name);
            p->position_table = place(lo, n[0], table_rows, table_cols, 1);
        }
        NAME(0, "attention/output/dense/weight");
        p->attn_out_w = place(lo, n[0], H, H, 1);
        NAME(0, "attention/output/dense/bias");
        p->attn_out_b = place(lo, n[0], H, 0, 0);
        NAME(0, "attention/output/LayerNorm/weight");
        p->norm1_g = place(lo, n[0], H, 0, 0);
        NAME(0, "attention/output/LayerNorm/bias");
        p->norm1_b = place(lo, n[0], H, 0, 0);
        NAME(0, "intermediate/dense/weight");
        p->ffn_in_w = place(lo, n[0], I, H, 1);
        NAME(0, "intermediate/dense/bias");
        p->ffn_in_b = place(lo, n[0], I, 0, 0);
        NAME(0, "output/dense/weight");
        p->ffn_out_w = place(lo, n[0], H, I, 1);
        NAME(0, "output/dense/bias");
        p->ffn_out_b = place(lo, n[0], H, 0, 0);
        NAME(0, "output/LayerNorm/weight");
        p->norm2_g = place(lo, n[0], H, 0, 0);
        NAME(0, "output/LayerNorm/bias");
        p->norm2_b = place(lo, n[0], H, 0, 0);
#undef NAME
    }
    if (c->norm == NORM_PRE) {
        mp->final_norm_g = place(lo, "bert/encoder/LayerNorm/weight", H, 0, 0);
        mp->final_norm_b = place(lo, "bert/encoder/LayerNorm/bias", H, 0, 0);
    }
    if (heads.pooler) {
        mp->pooler_w = place(lo, "bert/pooler/dense/weight", H, H, 1);
        mp->pooler_b = place(lo, "bert/pooler/dense/bias", H, 0, 0);
    }
    if (heads.mlm) {
        mp->head.transform_w = place(lo, "cls/predictions/transform/dense/weight", H, H, 1);
        mp->head.transform_b = place(lo, "cls/predictions/transform/dense/bias", H, 0, 0);
        mp->head.norm_g = place(lo, "cls/predictions/transform/LayerNorm/weight", H, 0, 0);
        mp->head.norm_b = place(lo, "cls/predictions/transform/LayerNorm/bias", H, 0, 0);
        mp->head.bias = place(lo, "cls/predictions/bias", V, 0, 0);
    }
    if (heads.num_labels) {
        mp->classifier_w = place(lo, "classifier/weight", heads.num_labels, H, 1);
        mp->classifier_b = place(lo, "classifier/bias", heads.num_labels, 0, 0);
    }
    if (heads.span) {
        mp->span_w = place(lo, "qa_outputs/weight", 2, H, 1);
        mp->span_b = place(lo, "qa_outputs/bias", 2, 0, 0);
    }
}

static void create(Model *m, const ModelConfig *cfg, ModelHeads heads, int with_grads) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->heads = heads;
    RP_CHECK(cfg->num_layers <= MODEL_MAX_LAYERS, "model.num_layers: at most %d supported, got %d",
             MODEL_MAX_LAYERS, cfg->num_layers);
    Layout lo = {&m->table, arena_measuring()};
    ModelParams unused;
    layout_model(cfg, heads, &lo, &unused);
    m->table.block_floats = lo.arena.used;
    const char *what = "the parameters (and again for the gradients) of [model] hidden_size, num_layers, "
                       "intermediate_size, vocab_size: make the model smaller";
    m->params = xalloc_floats_for(lo.arena.used, what);
    model_bind(m, m->params, &m->p);
    if (with_grads) {
        m->grads = xalloc_floats_for(lo.arena.used, what);
        model_bind(m, m->grads, &m->g);
    }
}

void model_create(Model *m, const ModelConfig *cfg, ModelHeads heads) { create(m, cfg, heads, 1); }

void model_create_inference(Model *m, const ModelConfig *cfg, ModelHeads heads) { create(m, cfg, heads, 0); }

void model_free(Model *m) {
    free(m->params);
    free(m->grads);
    free(m->table.items);
    memset(m, 0, sizeof *m);
}

void model_bind(const Model *m, float *block, ModelParams *out) {
    Layout lo = {NULL, arena_view(block, m->table.block_floats)};
    layout_model(&m->cfg, m->heads, &lo, out);
}

const ParamInfo *model_find_param(const Model *m, const char *name) {
    for (int i = 0; i < m->table.count; i++)
        if (!strcmp(m->table.items[i].name, name))
            return &m->table.items[i];
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

void model_init_weights(Model *m, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    const PosScheme *scheme = pos_scheme(m->cfg.relative_position);
    const int ones_table = scheme->init_ones && scheme->table_name;
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.items[i];
        float *w = m->params + p->offset;
        if (strstr(p->name, "LayerNorm/weight") || (ones_table && ends_with(p->name, scheme->table_name))) {
            for (size_t e = 0; e < p->count; e++)
                w[e] = 1.0f;
        } else if (ends_with(p->name, "bias")) {
            memset(w, 0, sizeof(float) * p->count);
        } else {
            for (size_t e = 0; e < p->count; e++)
                w[e] = (float)(rng_normal(&rng) * m->cfg.init_range);
        }
    }
}
