/* HuggingFace BERT folders <-> realpos models: tensors (hf.h; config.json in hf_config.c). */
#include "train/model/hf.h"

#include <cJSON.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomic_file.h"
#include "core/common.h"
#include "core/h5io.h"
#include "core/safetensors.h"
#include "train/model/hf_config.h"
#include "train/model/transfer.h"

#define DISTANCE_TABLE "attention/self/distance_embedding/weight"
#define POSITION_TABLE "bert/embeddings/position_embeddings/weight"

/* Every tensor of the folder's safetensors file(s), with its realpos name. */
typedef struct {
    StFile *shards;
    int num_shards;
    const StTensor **tensors;
    int *shard_of;
    char (*names)[PARAM_NAME_MAX]; /* realpos name ("" for a tensor always dropped) */
    int *used;
    int count;
} Weights;

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* realpos name of an HF tensor name: "bert." added to BertModel's names, TF's gamma/beta renamed,
 * '.' -> '/'. "" for tensors that are never parameters (the NSP head, position_ids buffers, the
 * decoder that realpos ties to the word embeddings: checked separately). */
static void realpos_name(const char *hf, char *out, const char *path) {
    out[0] = '\0';
    if (ends_with(hf, "position_ids") || starts_with(hf, "cls.seq_relationship.") ||
        starts_with(hf, "cls.predictions.decoder."))
        return;
    char name[PARAM_NAME_MAX + 8];
    int bare = starts_with(hf, "embeddings.") || starts_with(hf, "encoder.") || starts_with(hf, "pooler.");
    RP_CHECK(strlen(hf) + 5 < PARAM_NAME_MAX, "%s: tensor name too long: '%.80s...'", path, hf);
    snprintf(name, sizeof name, "%s%s", bare ? "bert." : "", hf);
    size_t n = strlen(name);
    if (ends_with(name, "LayerNorm.gamma"))
        strcpy(name + n - 5, "weight");
    else if (ends_with(name, "LayerNorm.beta"))
        strcpy(name + n - 4, "bias");
    for (char *c = name; *c; c++)
        if (*c == '.')
            *c = '/';
    strcpy(out, name);
}

/* Shard file names of model.safetensors.index.json, checked against the weight map. */
static void open_weights(const char *dir, Weights *w) {
    char path[4096], index[4096];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat st;
    memset(w, 0, sizeof *w);
    cJSON *map = NULL, *json = NULL;
    char *text = NULL;
    if (stat(index, &st) == 0) {
        text = read_file(index, NULL, "safetensors index");
        json = cJSON_Parse(text);
        map = json ? cJSON_GetObjectItemCaseSensitive(json, "weight_map") : NULL;
        RP_CHECK(cJSON_IsObject(map) && map->child, "%s: expected a JSON object with a non-empty 'weight_map'", index);
        w->shards = xcalloc((size_t)cJSON_GetArraySize(map), sizeof(StFile));
        for (const cJSON *e = map->child; e; e = e->next) {
            RP_CHECK(cJSON_IsString(e) && *e->valuestring && !strchr(e->valuestring, '/') &&
                         strcmp(e->valuestring, "..") && ends_with(e->valuestring, ".safetensors"),
                     "%s: weight_map['%s']: expected a .safetensors file name in the same folder", index, e->string);
            snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
            int known = 0;
            for (int s = 0; s < w->num_shards; s++)
                known |= !strcmp(w->shards[s].path, path);
            if (!known)
                st_open(&w->shards[w->num_shards++], path);
        }
    } else {
        RP_CHECK(stat(path, &st) == 0, "%s: no model.safetensors or model.safetensors.index.json (realpos reads "
                 "safetensors only; convert pytorch_model.bin first)", dir);
        w->shards = xcalloc(1, sizeof(StFile));
        st_open(&w->shards[w->num_shards++], path);
    }
    for (int s = 0; s < w->num_shards; s++)
        w->count += w->shards[s].count;
    w->tensors = xmalloc(sizeof(StTensor *) * (size_t)(w->count + 1));
    w->shard_of = xmalloc(sizeof(int) * (size_t)(w->count + 1));
    w->names = xcalloc((size_t)(w->count + 1), sizeof *w->names);
    w->used = xcalloc((size_t)(w->count + 1), sizeof(int));
    int n = 0;
    for (int s = 0; s < w->num_shards; s++)
        for (int i = 0; i < w->shards[s].count; i++) {
            const StTensor *t = &w->shards[s].tensors[i];
            if (map) {
                const cJSON *where = cJSON_GetObjectItemCaseSensitive(map, t->name);
                if (where)
                    snprintf(path, sizeof path, "%s/%s", dir, where->valuestring);
                RP_CHECK(where && !strcmp(w->shards[s].path, path),
                         "%s: tensor '%s' of %s is not in the weight_map of %s (or mapped to another file)", dir,
                         t->name, w->shards[s].path, index);
            }
            w->tensors[n] = t;
            w->shard_of[n] = s;
            realpos_name(t->name, w->names[n], w->shards[s].path);
            for (int j = 0; j < n; j++)
                RP_CHECK(!w->names[n][0] || strcmp(w->names[j], w->names[n]),
                         "%s: tensors '%s' and '%s' are the same parameter (%s)", dir, w->tensors[j]->name, t->name,
                         w->names[n]);
            n++;
        }
    if (map)
        for (const cJSON *e = map->child; e; e = e->next) {
            int found = 0;
            for (int i = 0; i < n && !found; i++)
                found = !strcmp(w->tensors[i]->name, e->string);
            RP_CHECK(found, "%s: weight_map names tensor '%s', which %s does not hold", index, e->string,
                     e->valuestring);
        }
    cJSON_Delete(json);
    free(text);
}

static void close_weights(Weights *w) {
    for (int s = 0; s < w->num_shards; s++)
        st_close(&w->shards[s]);
    free(w->shards);
    free(w->tensors);
    free(w->shard_of);
    free(w->names);
    free(w->used);
}

/* Index of the tensor with that realpos name (by_hf_name = 0) or HF name, or -1. */
static int find_weight(const Weights *w, const char *name, int by_hf_name) {
    for (int i = 0; i < w->count; i++)
        if (!strcmp(by_hf_name ? w->tensors[i]->name : w->names[i], name))
            return i;
    return -1;
}

static int any_weight(const Weights *w, const char *prefix) {
    for (int i = 0; i < w->count; i++)
        if (starts_with(w->names[i], prefix))
            return 1;
    return 0;
}

static float *read_weight(const Weights *w, int i) {
    float *data = xalloc_floats(w->tensors[i]->numel);
    st_read_floats(&w->shards[w->shard_of[i]], w->tensors[i], data);
    return data;
}

static void shape_text(char *out, size_t size, const StTensor *t) {
    hsize_t dims[ST_MAX_RANK];
    for (int d = 0; d < t->rank; d++)
        dims[d] = (hsize_t)t->shape[d];
    h5_shape_text(out, size, t->rank, dims);
}

/* A tied copy (the MLM decoder) must equal its realpos counterpart bit for bit. */
static void check_tied(const Weights *w, const Model *m, const char *hf, const char *realpos) {
    int i = find_weight(w, hf, 1);
    if (i < 0)
        return;
    const ParamInfo *p = model_find_param(m, realpos);
    RP_CHECK(p, "%s: tensor '%s' without the MLM head it belongs to", w->shards[w->shard_of[i]].path, hf);
    float *data = read_weight(w, i);
    RP_CHECK(w->tensors[i]->numel == p->count && !memcmp(data, m->params + p->offset, sizeof(float) * p->count),
             "%s: tensor '%s' differs from '%s': realpos ties the MLM decoder to it, an untied decoder cannot be "
             "represented", w->shards[w->shard_of[i]].path, hf, realpos);
    free(data);
}

/* HF table [2P-1, d] (row i - j + P - 1) -> realpos [2k+1, d] (row clip(i - j, -k, k) + k): rows
 * P-1-k .. P-1+k; the rows beyond must repeat the edge rows (what realpos's clip means). */
static void load_distance_table(const Weights *w, int i, float *out, int k, int P, int d) {
    const StTensor *t = w->tensors[i];
    char have[64];
    shape_text(have, sizeof have, t);
    RP_CHECK(t->rank == 2 && t->shape[0] == (uint64_t)(2 * P - 1) && t->shape[1] == (uint64_t)d,
             "%s: tensor '%s': expected shape [%d, %d] (2 max_position_embeddings - 1, head size), got %s",
             w->shards[w->shard_of[i]].path, t->name, 2 * P - 1, d, have);
    float *full = read_weight(w, i);
    size_t row = sizeof(float) * (size_t)d;
    for (int u = 0; u < 2 * P - 1; u++) {
        int edge = u < P - 1 - k ? P - 1 - k : u > P - 1 + k ? P - 1 + k : u;
        RP_CHECK(!memcmp(full + (size_t)u * d, full + (size_t)edge * d, row),
                 "%s: tensor '%s': row %d differs from row %d, but realpos_relative_k = %d says distances beyond %d "
                 "are clipped", w->shards[w->shard_of[i]].path, t->name, u, edge, k, k);
    }
    memcpy(out, full + (size_t)(P - 1 - k) * d, row * (size_t)(2 * k + 1));
    free(full);
}

static ModelHeads detect_heads(const Weights *w, const char *dir) {
    ModelHeads h = {any_weight(w, "cls/predictions/"), any_weight(w, "bert/pooler/"), 0, any_weight(w, "qa_outputs/")};
    int c = find_weight(w, "classifier/weight", 0);
    if (c >= 0) {
        RP_CHECK(w->tensors[c]->rank == 2 && w->tensors[c]->shape[0] >= 1 && w->tensors[c]->shape[0] <= 1024,
                 "%s: tensor 'classifier.weight': expected shape [num_labels, hidden_size]", dir);
        h.num_labels = (int)w->tensors[c]->shape[0];
        RP_CHECK(h.pooler, "%s: a classifier without the pooler (bert.pooler.dense.*) is not BERT's "
                 "sequence-classification head", dir);
    }
    RP_CHECK(h.mlm + (h.num_labels > 0) + h.span <= 1, "%s: more than one of the MLM, classification and QA heads",
             dir);
    return h;
}

void hf_import(const char *dir, HfImport *out, Model *m, FILE *table) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    HfConfig hc;
    hf_config_read(path, &hc);
    Weights w;
    open_weights(dir, &w);
    out->heads = detect_heads(&w, dir);
    config_defaults(&out->cfg);
    out->cfg.model = hc.model;
    DataConfig *data = &out->cfg.data;
    data->max_seq_len = data->max_seq_len < hc.model.max_position ? data->max_seq_len : hc.model.max_position;
    data->max_predictions_per_seq = data->max_predictions_per_seq < data->max_seq_len
                                        ? data->max_predictions_per_seq : data->max_seq_len;
    TaskConfig *task = &out->cfg.task;
    task->max_seq_len = task->max_seq_len < hc.model.max_position ? task->max_seq_len : hc.model.max_position;
    if (out->heads.span)
        task->type = TASK_SQUAD;
    if (out->heads.num_labels) {
        int regression = hc.regression || (!hc.num_labels && out->heads.num_labels == 1);
        task->type = regression ? TASK_REGRESSION : TASK_CLASSIFICATION;
        RP_CHECK(!hc.num_labels || hc.num_labels == out->heads.num_labels,
                 "%s: id2label has %d labels but classifier.weight has %d rows", path, hc.num_labels,
                 out->heads.num_labels);
        RP_CHECK(regression || out->heads.num_labels >= 2, "%s: a classifier with one row is a regression head: "
                 "expected \"problem_type\": \"regression\"", path);
        task->labels[0] = '\0';
        for (int i = 0; i < out->heads.num_labels && !regression; i++) {
            char id[16];
            snprintf(id, sizeof id, "%d", i);
            const char *name = hc.num_labels ? hc.labels[i] : id;
            RP_CHECK(strlen(task->labels) + strlen(name) + 2 < sizeof task->labels, "%s: id2label too long", path);
            strcat(strcat(task->labels, i ? " " : ""), name);
        }
    }
    if (task->max_query_length > task->max_seq_len - 4)
        task->max_query_length = task->max_seq_len - 4; /* a SQuAD window must hold context */
    model_create_inference(m, &out->cfg.model, out->heads);
    const ModelConfig *c = &m->cfg;
    int P = c->max_position, d = c->hidden_size / c->num_heads;
    TransferSummary summary = {0, 0, 0, 0};
    fprintf(table, "parameters from %s:\n", dir);
    for (int p = 0; p < m->table.count; p++) {
        const ParamInfo *info = &m->table.items[p];
        int i = find_weight(&w, info->name, 0);
        RP_CHECK(i >= 0, "%s: missing tensor for realpos parameter '%s' (HF name with '/' -> '.', with or without "
                 "the 'bert.' prefix)", dir, info->name);
        w.used[i] = 1;
        float *dst = m->params + info->offset;
        hsize_t dims[2];
        int rank = h5_param_dims(info, dims);
        if (ends_with(info->name, DISTANCE_TABLE)) {
            load_distance_table(&w, i, dst, c->relative_k, P, d);
        } else {
            const StTensor *t = w.tensors[i];
            char have[64], want[64];
            shape_text(have, sizeof have, t);
            h5_shape_text(want, sizeof want, rank, dims);
            RP_CHECK(t->rank == rank && t->shape[0] == dims[0] && (rank == 1 || t->shape[1] == dims[1]),
                     "%s: tensor '%s': expected shape %s from config.json, got %s", w.shards[w.shard_of[i]].path,
                     t->name, want, have);
            st_read_floats(&w.shards[w.shard_of[i]], t, dst);
        }
        transfer_print(table, "loaded", info->name, rank, dims);
        summary.loaded++;
    }
    RP_CHECK(!hc.untied || !out->heads.mlm || find_weight(&w, "cls.predictions.decoder.weight", 1) >= 0,
             "%s: key 'tie_word_embeddings' is false but there is no cls.predictions.decoder.weight", path);
    check_tied(&w, m, "cls.predictions.decoder.weight", "bert/embeddings/word_embeddings/weight");
    check_tied(&w, m, "cls.predictions.decoder.bias", "cls/predictions/bias");
    for (int i = 0; i < w.count; i++) {
        if (w.used[i])
            continue;
        const char *name = w.names[i];
        RP_CHECK(!name[0] || (!strcmp(name, POSITION_TABLE) && !c->absolute_position),
                 "%s: tensor '%s' (%s) is not a parameter of the model config.json describes", dir,
                 w.tensors[i]->name, w.shards[w.shard_of[i]].path);
        hsize_t dims[ST_MAX_RANK];
        for (int k = 0; k < w.tensors[i]->rank; k++)
            dims[k] = w.tensors[i]->shape[k];
        transfer_print(table, "dropped", w.tensors[i]->name, w.tensors[i]->rank, dims);
        summary.dropped++;
    }
    transfer_print_summary(table, &summary);
    close_weights(&w);
}

int hf_read_lower_case(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    struct stat st;
    if (stat(path, &st) != 0)
        return 1;
    char *text = read_file(path, NULL, "tokenizer config");
    cJSON *json = cJSON_Parse(text);
    RP_CHECK(cJSON_IsObject(json), "%s: not a JSON object", path);
    const cJSON *lower = cJSON_GetObjectItemCaseSensitive(json, "do_lower_case");
    RP_CHECK(!lower || cJSON_IsBool(lower), "%s: key 'do_lower_case': expected true or false", path);
    int result = !lower || cJSON_IsTrue(lower);
    /* realpos's BasicTokenizer strips accents exactly when it lower-cases and always splits CJK */
    const cJSON *strip = cJSON_GetObjectItemCaseSensitive(json, "strip_accents");
    RP_CHECK(!strip || cJSON_IsNull(strip) || (cJSON_IsBool(strip) && cJSON_IsTrue(strip) == result),
             "%s: key 'strip_accents': realpos strips accents exactly when it lower-cases (do_lower_case = %s), "
             "expected null or %s", path, result ? "true" : "false", result ? "true" : "false");
    const cJSON *cjk = cJSON_GetObjectItemCaseSensitive(json, "tokenize_chinese_chars");
    RP_CHECK(!cjk || cJSON_IsTrue(cjk), "%s: key 'tokenize_chinese_chars': realpos always splits CJK characters, "
             "expected true", path);
    cJSON_Delete(json);
    free(text);
    return result;
}

int hf_export_check(const Config *cfg, ModelHeads heads, char *why, size_t size) {
    const ModelConfig *m = &cfg->model;
    int rel = m->relative_position, P = m->max_position;
    int trained = heads.mlm ? cfg->data.max_seq_len : cfg->task.max_seq_len;
    if (m->norm == NORM_PRE)
        snprintf(why, size, "model.norm = pre: HF BERT is Post-LN (LayerNorm after each residual)");
    else if (m->residual_attention)
        snprintf(why, size, "model.residual_attention = yes: HF BERT has no residual (RealFormer) attention");
    else if (rel != REL_NONE && rel != REL_SHAW && rel != REL_METHOD4)
        snprintf(why, size, "model.relative_position = %s: HF BERT has only relative_key (shaw) and "
                 "relative_key_query (method4)", rel_kind_name(m->relative_position));
    else if (rel != REL_NONE && m->absolute_position)
        snprintf(why, size, "absolute and relative positions together: HF BERT adds absolute position embeddings "
                 "only when position_embedding_type = absolute");
    else if (rel == REL_NONE && !m->absolute_position)
        snprintf(why, size, "no position information (absolute_position = no, relative_position = none): HF BERT "
                 "always has one");
    else if (rel != REL_NONE && m->relative_k > P - 1)
        snprintf(why, size, "model.relative_k = %d > max_position - 1 = %d: HF's table has 2 max_position - 1 "
                 "rows, distances beyond %d would be lost", m->relative_k, P - 1, P - 1);
    else if (rel != REL_NONE && trained > P)
        snprintf(why, size, "trained on sequences of %d tokens (%s.max_seq_len) but model.max_position = %d: HF "
                 "BERT cannot run sequences longer than max_position_embeddings", trained,
                 heads.mlm ? "data" : "task", P);
    else
        return 1;
    return 0;
}

/* realpos table [2k+1, d] -> HF's [2P-1, d], rows beyond +-k repeating the edge rows. */
static float *expand_distance_table(const float *table, int k, int P, int d) {
    float *full = xalloc_floats((size_t)(2 * P - 1) * d);
    for (int u = 0; u < 2 * P - 1; u++) {
        int delta = u - (P - 1), r = (delta < -k ? -k : delta > k ? k : delta) + k;
        memcpy(full + (size_t)u * d, table + (size_t)r * d, sizeof(float) * (size_t)d);
    }
    return full;
}

int hf_export(const char *dir, const Config *cfg, const Model *m, const char *const *label_names, char *why,
              size_t why_size) {
    const ModelConfig *c = &cfg->model;
    int bare = !m->heads.mlm && !m->heads.num_labels && !m->heads.span; /* BertModel: no "bert." prefix */
    int P = c->max_position, d = c->hidden_size / c->num_heads;
    StWriteTensor *out = xcalloc((size_t)m->table.count + 1, sizeof *out);
    char (*names)[PARAM_NAME_MAX] = xcalloc((size_t)m->table.count + 1, sizeof *names);
    float **owned = xcalloc((size_t)m->table.count + 1, sizeof(float *));
    int n = 0;
    for (int p = 0; p < m->table.count; p++) {
        const ParamInfo *info = &m->table.items[p];
        StWriteTensor *t = &out[n];
        snprintf(names[n], PARAM_NAME_MAX, "%s", info->name + (bare && starts_with(info->name, "bert/") ? 5 : 0));
        for (char *ch = names[n]; *ch; ch++)
            if (*ch == '/')
                *ch = '.';
        t->name = names[n];
        t->rank = info->cols ? 2 : 1;
        t->shape[0] = (uint64_t)info->rows;
        t->shape[1] = (uint64_t)info->cols;
        t->data = m->params + info->offset;
        if (ends_with(info->name, DISTANCE_TABLE)) {
            t->data = owned[n] = expand_distance_table(t->data, c->relative_k, P, d);
            t->shape[0] = (uint64_t)(2 * P - 1);
        }
        n++;
        if (!c->absolute_position && !strcmp(info->name, "bert/embeddings/word_embeddings/weight")) {
            /* HF's relative models still carry an (unused) absolute table */
            snprintf(names[n], PARAM_NAME_MAX, "%sembeddings.position_embeddings.weight", bare ? "" : "bert.");
            out[n] = (StWriteTensor){names[n], 2, {(uint64_t)P, (uint64_t)c->hidden_size}, NULL};
            out[n].data = owned[n] = xalloc_floats((size_t)P * c->hidden_size);
            n++;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt"};
    int rc = st_write_floats(path, out, n, meta, 1, why, why_size);
    for (int i = 0; i < n; i++)
        free(owned[i]);
    free(owned);
    free(names);
    free(out);
    if (rc != 0)
        return rc;
    char *json = hf_config_write(cfg, m->heads, label_names);
    snprintf(path, sizeof path, "%s/config.json", dir);
    rc = write_file_status(path, json, strlen(json), why, why_size);
    free(json);
    return rc;
}

int hf_write_tokenizer_config(const char *dir, int do_lower_case, int max_length, char *why, size_t why_size) {
    cJSON *json = cJSON_CreateObject();
    cJSON_AddStringToObject(json, "tokenizer_class", "BertTokenizer");
    cJSON_AddBoolToObject(json, "do_lower_case", do_lower_case);
    cJSON_AddNumberToObject(json, "model_max_length", max_length);
    char *text = cJSON_Print(json), path[4096];
    cJSON_Delete(json);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    int rc = write_file_status(path, text, strlen(text), why, why_size);
    free(text);
    return rc;
}
