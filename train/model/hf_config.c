/* config.json of HuggingFace BERT <-> realpos [model] (hf_config.h). */
#include "train/model/hf_config.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/io/json.h"


/* Integer key in [min, max]; `fallback` < min means required. */
static int json_int(const cJSON *json, const char *key, long fallback, long min, long max, const char *path) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    if (!item) {
        RP_CHECK(fallback >= min, "%s: missing key '%s' (an integer)", path, key);
        return (int)fallback;
    }
    RP_CHECK(cJSON_IsNumber(item) && item->valuedouble == floor(item->valuedouble) && item->valuedouble >= min &&
                 item->valuedouble <= max,
             "%s: key '%s': expected an integer in [%ld, %ld]", path, key, min, max);
    return (int)item->valuedouble;
}

/* Float key in [min, max) (or (0, inf) when positive), HF's default when absent. */
static float json_float(const cJSON *json, const char *key, double fallback, int positive, const char *path) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    if (!item)
        return (float)fallback;
    RP_CHECK(cJSON_IsNumber(item), "%s: key '%s': expected a number", path, key);
    double v = item->valuedouble;
    RP_CHECK(positive ? v > 0 && isfinite(v) : v >= 0 && v < 1, "%s: key '%s': expected %s, got %g", path, key,
             positive ? "a positive number" : "a probability in [0, 1)", v);
    return (float)v;
}

static const char *json_string(const cJSON *json, const char *key, const char *fallback, const char *path) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, key);
    if (!item)
        return fallback;
    RP_CHECK(cJSON_IsString(item), "%s: key '%s': expected a string", path, key);
    return item->valuestring;
}

/* realpos keeps labels as words (task.labels, task.tag_labels) and writes them into TSV predictions:
 * a label must be 1 to HF_LABEL_MAX - 1 bytes without whitespace or control characters. Anything
 * else is refused here, naming the label, rather than stored in a form that predict or inspect would
 * later misread (or replaced by its index). A classifier's labels may not hold ';' either (hf.c). */
static void check_label(const char *label, long id, const char *path) {
    size_t n = strlen(label);
    RP_CHECK(n > 0, "%s: key 'id2label': id %ld: an empty label name; realpos labels are words (rename it in "
             "config.json)", path, id);
    RP_CHECK(n < HF_LABEL_MAX, "%s: key 'id2label': id %ld: a label name of %zu bytes \"%.40s...\"; realpos labels "
             "have at most %d bytes (rename it in config.json)", path, id, n, label, HF_LABEL_MAX - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)label[i];
        RP_CHECK(c > ' ' && c != 0x7f, "%s: key 'id2label': id %ld: label \"%s\" contains %s; realpos labels are "
                 "words without whitespace or control characters (they are kept as the INI keys task.labels or "
                 "task.tag_labels and written into TSV predictions): rename it in config.json", path, id, label,
                 c == ' ' ? "a space" : c == '\t' ? "a tab" : c == '\n' || c == '\r' ? "a line break"
                 : "a control character");
    }
}

static void read_labels(const cJSON *json, HfConfig *out, const char *path) {
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(json, "id2label");
    if (id2label) {
        RP_CHECK(cJSON_IsObject(id2label), "%s: key 'id2label': expected an object", path);
        int n = cJSON_GetArraySize(id2label);
        RP_CHECK(n >= 1 && n <= HF_MAX_LABELS, "%s: key 'id2label': expected 1 to %d labels, got %d", path,
                 HF_MAX_LABELS, n);
        for (const cJSON *e = id2label->child; e; e = e->next) {
            char *end;
            long id = strtol(e->string, &end, 10);
            RP_CHECK(*e->string && !*end && id >= 0 && id < n && cJSON_IsString(e),
                     "%s: key 'id2label': entry '%s': expected \"0\"..\"%d\" mapped to a string", path, e->string,
                     n - 1);
            RP_CHECK(!out->labels[id][0], "%s: key 'id2label': id %ld appears twice", path, id);
            check_label(e->valuestring, id, path);
            for (const cJSON *f = id2label->child; f != e; f = f->next)
                RP_CHECK(strcmp(f->valuestring, e->valuestring), "%s: key 'id2label': ids %s and %ld are both named "
                         "\"%s\" (label2id cannot tell them apart); give each label its own name", path, f->string,
                         id, e->valuestring);
            snprintf(out->labels[id], HF_LABEL_MAX, "%s", e->valuestring);
        }
        out->num_labels = n;
    }
    if (cJSON_GetObjectItemCaseSensitive(json, "num_labels")) {
        int n = json_int(json, "num_labels", 0, 1, HF_MAX_LABELS, path);
        RP_CHECK(!out->num_labels || n == out->num_labels, "%s: key 'num_labels' = %d disagrees with 'id2label' (%d)",
                 path, n, out->num_labels);
        for (int id = out->num_labels; id < n; id++)
            snprintf(out->labels[id], HF_LABEL_MAX, "%d", id);
        out->num_labels = n;
    }
    const char *problem = json_string(json, "problem_type", "", path);
    RP_CHECK(!*problem || !strcmp(problem, "regression") || !strcmp(problem, "single_label_classification"),
             "%s: key 'problem_type': expected regression or single_label_classification, got '%s' "
             "(realpos has no multi-label head)", path, problem);
    out->regression = !strcmp(problem, "regression") || (!*problem && out->num_labels == 1);
}

void hf_config_read(const char *path, HfConfig *out) {
    memset(out, 0, sizeof *out);
    cJSON *json = json_read_file(path, "HuggingFace config");
    RP_CHECK(cJSON_IsObject(json), "%s: not a JSON object", path);
    const char *type = json_string(json, "model_type", "bert", path);
    RP_CHECK(!strcmp(type, "bert"), "%s: key 'model_type': expected \"bert\", got \"%s\"", path, type);
    const char *flags[] = {"is_decoder", "add_cross_attention"};
    for (int i = 0; i < 2; i++)
        RP_CHECK(!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, flags[i])),
                 "%s: key '%s': realpos has encoders only, expected false", path, flags[i]);
    const char *act = json_string(json, "hidden_act", "gelu", path);
    RP_CHECK(!strcmp(act, "gelu"), "%s: key 'hidden_act': realpos's GELU is the exact erf form (\"gelu\"), got \"%s\"",
             path, act);
    ModelConfig *m = &out->model;
    m->hidden_size = json_int(json, "hidden_size", -1, 1, 65536, path);
    m->num_layers = json_int(json, "num_hidden_layers", -1, 1, MODEL_MAX_LAYERS, path);
    m->num_heads = json_int(json, "num_attention_heads", -1, 1, 65536, path);
    RP_CHECK(m->hidden_size % m->num_heads == 0, "%s: key 'num_attention_heads': expected a divisor of hidden_size = %d",
             path, m->hidden_size);
    m->intermediate_size = json_int(json, "intermediate_size", -1, 1, 1 << 20, path);
    m->vocab_size = json_int(json, "vocab_size", -1, 1, 1 << 24, path);
    m->max_position = json_int(json, "max_position_embeddings", -1, 8, 65536, path);
    m->type_vocab_size = json_int(json, "type_vocab_size", -1, 1, 1024, path);
    m->layer_norm_eps = json_float(json, "layer_norm_eps", 1e-12, 1, path);
    m->hidden_dropout = json_float(json, "hidden_dropout_prob", 0.1, 0, path);
    m->attention_dropout = json_float(json, "attention_probs_dropout_prob", 0.1, 0, path);
    m->init_range = json_float(json, "initializer_range", 0.02, 1, path);
    m->norm = NORM_POST;
    m->seed = 42;
    const char *kind = json_string(json, "position_embedding_type", "absolute", path);
    /* the scheme whose HF form it is; the forms listed "a, b or c" for the message */
    const char *forms[REL_KIND_COUNT];
    int found = -1, n = 0;
    for (int r = 0; r < REL_KIND_COUNT; r++) {
        const char *form = pos_scheme((RelKind)r)->hf_type;
        if (!form)
            continue;
        if (!strcmp(kind, form))
            found = r;
        forms[n++] = form;
    }
    char expected[160] = "";
    for (int i = 0; i < n; i++)
        snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
                 i == 0 ? "" : i == n - 1 ? " or " : ", ", forms[i]);
    RP_CHECK(found >= 0, "%s: key 'position_embedding_type': expected %s, got \"%s\"", path, expected, kind);
    m->relative_position = (RelKind)found;
    m->absolute_position = pos_scheme(m->relative_position)->adds_nothing;
    out->explicit_k = cJSON_GetObjectItemCaseSensitive(json, "realpos_relative_k") != NULL;
    m->relative_k = json_int(json, "realpos_relative_k", m->max_position - 1, 1, m->max_position - 1, path);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(json, "tie_word_embeddings");
    RP_CHECK(!tie || cJSON_IsBool(tie), "%s: key 'tie_word_embeddings': expected true or false", path);
    out->untied = tie && cJSON_IsFalse(tie);
    read_labels(json, out, path);
    cJSON_Delete(json);
}

/* The shortest decimal that reads back as the same float32 (0.1f -> 0.1, not 0.100000001). */
static double short_float(float v) {
    char text[32];
    format_float(text, sizeof text, v);
    return strtod(text, NULL);
}

char *hf_config_write(const Config *cfg, ModelHeads heads, const char *const *label_names) {
    const ModelConfig *m = &cfg->model;
    cJSON *json = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    const char *architecture = heads.mlm ? "BertForMaskedLM"
                               : heads.num_labels && !heads.pooler ? "BertForTokenClassification"
                               : heads.num_labels ? "BertForSequenceClassification"
                               : heads.span ? "BertForQuestionAnswering" : "BertModel";
    cJSON_AddItemToArray(arch, cJSON_CreateString(architecture));
    cJSON_AddItemToObject(json, "architectures", arch);
    cJSON_AddStringToObject(json, "model_type", "bert");
    cJSON_AddNumberToObject(json, "attention_probs_dropout_prob", short_float(m->attention_dropout));
    cJSON_AddStringToObject(json, "hidden_act", "gelu");
    cJSON_AddNumberToObject(json, "hidden_dropout_prob", short_float(m->hidden_dropout));
    cJSON_AddNumberToObject(json, "hidden_size", m->hidden_size);
    cJSON_AddNumberToObject(json, "initializer_range", short_float(m->init_range));
    cJSON_AddNumberToObject(json, "intermediate_size", m->intermediate_size);
    cJSON_AddNumberToObject(json, "layer_norm_eps", short_float(m->layer_norm_eps));
    cJSON_AddNumberToObject(json, "max_position_embeddings", m->max_position);
    cJSON_AddNumberToObject(json, "num_attention_heads", m->num_heads);
    cJSON_AddNumberToObject(json, "num_hidden_layers", m->num_layers);
    const PosScheme *scheme = pos_scheme(m->relative_position);
    /* hf_export_check refused a scheme without an HF form */
    cJSON_AddStringToObject(json, "position_embedding_type", scheme->hf_type ? scheme->hf_type : "absolute");
    if (scheme->uses_k && m->relative_k < m->max_position - 1)
        cJSON_AddNumberToObject(json, "realpos_relative_k", m->relative_k);
    cJSON_AddNumberToObject(json, "type_vocab_size", m->type_vocab_size);
    cJSON_AddNumberToObject(json, "vocab_size", m->vocab_size);
    if (heads.num_labels) {
        int regression = cfg->task.type == TASK_REGRESSION;
        cJSON *id2label = cJSON_CreateObject(), *label2id = cJSON_CreateObject();
        for (int i = 0; i < heads.num_labels; i++) {
            char id[16], fallback[32];
            snprintf(id, sizeof id, "%d", i);
            snprintf(fallback, sizeof fallback, "LABEL_%d", i);
            const char *name = label_names && !regression ? label_names[i] : fallback;
            cJSON_AddStringToObject(id2label, id, name);
            cJSON_AddNumberToObject(label2id, name, i);
        }
        cJSON_AddItemToObject(json, "id2label", id2label);
        cJSON_AddItemToObject(json, "label2id", label2id);
        if (heads.pooler) /* BertForTokenClassification reads no problem_type */
            cJSON_AddStringToObject(json, "problem_type", regression ? "regression" : "single_label_classification");
    }
    char *text = cJSON_Print(json);
    cJSON_Delete(json);
    RP_CHECK(text, "out of memory writing config.json");
    return text;
}
