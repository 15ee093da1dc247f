/* HuggingFace BERT folders from realpos models: what HF BERT can express, and the writers of
 * model.safetensors, config.json and tokenizer_config.json (hf.h; import in hf.c). */
#include <cJSON.h>
#include <stdarg.h>
#include <string.h>

#include "core/io/atomic_file.h"
#include "core/common.h"
#include "core/io/safetensors.h"
#include "train/model/hf.h"
#include "train/model/hf_config.h"

#define DISTANCE_TABLE "attention/self/distance_embedding/weight"

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* Appends "(n) reason" to why (reasons separated by "; "). */
static void add_reason(char *why, size_t size, int *count, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_reason(char *why, size_t size, int *count, const char *fmt, ...) {
    size_t used = strlen(why);
    if (used + 1 >= size)
        return;
    used += (size_t)snprintf(why + used, size - used, "%s(%d) ", *count ? "; " : "", *count + 1);
    va_list ap;
    va_start(ap, fmt);
    if (used < size)
        vsnprintf(why + used, size - used, fmt, ap);
    va_end(ap);
    ++*count;
}

int hf_export_check(const Config *cfg, ModelHeads heads, char *why, size_t size) {
    const ModelConfig *m = &cfg->model;
    int P = m->max_position, count = 0;
    int trained = heads.mlm ? cfg->data.max_seq_len : cfg->task.max_seq_len;
    why[0] = '\0';
    if (m->norm == NORM_PRE)
        add_reason(why, size, &count, "model.norm = pre: HF BERT is Post-LN (LayerNorm after each residual)");
    if (m->residual_attention)
        add_reason(why, size, &count, "model.residual_attention = yes: HF BERT has no residual (RealFormer) attention");
    const PosScheme *scheme = pos_scheme(m->relative_position);
    const int relative = !scheme->adds_nothing;
    if (!scheme->hf_type && scheme->hf_lacks)
        add_reason(why, size, &count, "model.relative_position = %s: HF BERT has no %s (its positions are "
                   "absolute embeddings, relative_key or relative_key_query); this model is of the %s family",
                   rel_kind_name(m->relative_position), scheme->hf_lacks, scheme->hf_family);
    else if (!scheme->hf_type)
        add_reason(why, size, &count, "model.relative_position = %s: HF BERT has only relative_key (shaw) and "
                   "relative_key_query (method4)", rel_kind_name(m->relative_position));
    if (relative && m->absolute_position)
        add_reason(why, size, &count, "absolute and relative positions together: HF BERT adds absolute position "
                   "embeddings only when position_embedding_type = absolute");
    if (!relative && !m->absolute_position)
        add_reason(why, size, &count, "no position information (absolute_position = no, relative_position = none): "
                   "HF BERT always has one");
    if (scheme->uses_k && m->relative_k > P - 1)
        add_reason(why, size, &count, "model.relative_k = %d > max_position - 1 = %d: HF's table has 2 max_position - 1 "
                   "rows, distances beyond %d would be lost", m->relative_k, P - 1, P - 1);
    if (scheme->uses_k && trained > P)
        add_reason(why, size, &count, "trained on sequences of %d tokens (%s.max_seq_len) but model.max_position = %d: "
                   "HF BERT cannot run sequences longer than max_position_embeddings", trained,
                   heads.mlm ? "data" : "task", P);
    return count == 0;
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
