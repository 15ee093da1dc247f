/* HuggingFace BERT folders -> realpos models: tensors (hf.h; config.json in hf_config.c, export in
 * hf_export.c). */
#include "train/model/hf.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "core/io/json.h"
#include "core/io/paths.h"
#include "core/io/safetensors.h"
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
    struct NameIndex *by_name, *by_hf_name; /* the tensors sorted by realpos / HF name: lookups in log time */
    int num_named;                          /* entries of by_name (tensors with a realpos name) */
} Weights;

typedef struct NameIndex {
    const char *name;
    int index;
} NameIndex;

static int by_name(const void *a, const void *b) {
    return strcmp(((const NameIndex *)a)->name, ((const NameIndex *)b)->name);
}

/* Index of name in a sorted NameIndex array of n, or -1. */
static int lookup(const NameIndex *sorted, int n, const char *name) {
    NameIndex key = {name, -1};
    const NameIndex *hit = bsearch(&key, sorted, (size_t)n, sizeof key, by_name);
    return hit ? hit->index : -1;
}

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

/* Every tensor of model.safetensors, or of the shards model.safetensors.index.json names (checked
 * against its weight map). Tensor names are compared through sorted indexes, so a header of n
 * tensors costs O(n log n) (a 150,000-entry header: well under a second), not O(n^2). */
static void open_weights(const char *dir, Weights *w) {
    char path[4096], index[4096];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat st;
    memset(w, 0, sizeof *w);
    cJSON *map = NULL, *json = NULL;
    NameIndex *mapped = NULL;
    int num_mapped = 0;
    if (stat(index, &st) == 0) {
        json = json_read_file(index, "safetensors index");
        map = cJSON_GetObjectItemCaseSensitive(json, "weight_map");
        RP_CHECK(cJSON_IsObject(map) && map->child, "%s: expected a JSON object with a non-empty 'weight_map'", index);
        w->shards = xcalloc((size_t)cJSON_GetArraySize(map), sizeof(StFile));
        mapped = xmalloc(sizeof(NameIndex) * (size_t)cJSON_GetArraySize(map));
        for (const cJSON *e = map->child; e; e = e->next) {
            RP_CHECK(cJSON_IsString(e) && *e->valuestring && !strchr(e->valuestring, '/') &&
                         strcmp(e->valuestring, "..") && ends_with(e->valuestring, ".safetensors"),
                     "%s: weight_map['%s']: expected a .safetensors file name in the same folder", index, e->string);
            snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
            int shard = -1;
            for (int s = 0; s < w->num_shards && shard < 0; s++) /* a handful of shards */
                shard = !strcmp(w->shards[s].path, path) ? s : -1;
            if (shard < 0) {
                shard = w->num_shards++;
                st_open(&w->shards[shard], path);
            }
            mapped[num_mapped++] = (NameIndex){e->string, shard};
        }
        qsort(mapped, (size_t)num_mapped, sizeof *mapped, by_name);
    } else {
        RP_CHECK(stat(path, &st) == 0, "%s: no model.safetensors or model.safetensors.index.json (realpos reads "
                 "safetensors only; convert pytorch_model.bin first)", dir);
        w->shards = xcalloc(1, sizeof(StFile));
        st_open(&w->shards[w->num_shards++], path);
    }
    for (int s = 0; s < w->num_shards; s++)
        w->count += w->shards[s].count;
    size_t slots = (size_t)w->count + 1;
    w->tensors = xmalloc(sizeof(StTensor *) * slots);
    w->shard_of = xmalloc(sizeof(int) * slots);
    w->names = xcalloc(slots, sizeof *w->names);
    w->used = xcalloc(slots, sizeof(int));
    w->by_name = xmalloc(sizeof(NameIndex) * slots);
    w->by_hf_name = xmalloc(sizeof(NameIndex) * slots);
    int n = 0, named = 0;
    for (int s = 0; s < w->num_shards; s++)
        for (int i = 0; i < w->shards[s].count; i++, n++) {
            const StTensor *t = &w->shards[s].tensors[i];
            int shard = map ? lookup(mapped, num_mapped, t->name) : s;
            RP_CHECK(shard == s, "%s: tensor '%s' of %s is not in the weight_map of %s (or mapped to another file)",
                     dir, t->name, w->shards[s].path, index);
            w->tensors[n] = t;
            w->shard_of[n] = s;
            realpos_name(t->name, w->names[n], w->shards[s].path);
            w->by_hf_name[n] = (NameIndex){t->name, n};
            if (w->names[n][0])
                w->by_name[named++] = (NameIndex){w->names[n], n};
        }
    qsort(w->by_name, (size_t)named, sizeof(NameIndex), by_name);
    qsort(w->by_hf_name, (size_t)n, sizeof(NameIndex), by_name);
    for (int i = 1; i < named; i++)
        RP_CHECK(strcmp(w->by_name[i - 1].name, w->by_name[i].name), "%s: tensors '%s' and '%s' are the same "
                 "parameter (%s)", dir, w->tensors[w->by_name[i - 1].index]->name,
                 w->tensors[w->by_name[i].index]->name, w->by_name[i].name);
    w->num_named = named;
    for (int i = 0; i < num_mapped; i++)
        RP_CHECK(lookup(w->by_hf_name, n, mapped[i].name) >= 0, "%s: weight_map names tensor '%s', which %s does not "
                 "hold", index, mapped[i].name, w->shards[mapped[i].index].path);
    free(mapped);
    cJSON_Delete(json);
}

/* Adds dir/name to the plan if it exists (a missing file is reported by its reader, which knows
 * the better message: "no model.safetensors ... convert pytorch_model.bin first"). */
static void add_input(HfFiles *files, IoPlan *plan, const char *dir, const char *name, const char *what) {
    RP_CHECK(files->count < HF_MAX_FILES, "%s: more than %d files to read", dir, HF_MAX_FILES);
    char *path = files->path[files->count];
    snprintf(path, sizeof files->path[0], "%s/%s", dir, name);
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    files->count++;
    io_plan_input(plan, path, what);
}

void hf_plan_inputs(const char *dir, HfFiles *files, IoPlan *plan) {
    require_directory(dir, "the HuggingFace folder");
    files->count = 0;
    const char *names[] = {"config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors",
                           "model.safetensors.index.json"};
    for (int i = 0; i < 5; i++)
        add_input(files, plan, dir, names[i], names[i]);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    cJSON *json = json_read_file(path, "safetensors index");
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(json, "weight_map");
    for (const cJSON *e = cJSON_IsObject(map) ? map->child : NULL; e; e = e->next) {
        /* a malformed entry is open_weights's to name */
        int known = !cJSON_IsString(e) || strchr(e->valuestring, '/') || !ends_with(e->valuestring, ".safetensors");
        for (int f = 0; f < files->count && !known; f++)
            known = !strcmp(strrchr(files->path[f], '/') + 1, e->valuestring);
        if (!known)
            add_input(files, plan, dir, e->valuestring, "a safetensors shard");
    }
    cJSON_Delete(json);
}

static void close_weights(Weights *w) {
    for (int s = 0; s < w->num_shards; s++)
        st_close(&w->shards[s]);
    free(w->shards);
    free(w->tensors);
    free(w->shard_of);
    free(w->names);
    free(w->used);
    free(w->by_name);
    free(w->by_hf_name);
}

/* Index of the tensor with that realpos name (by_hf_name = 0) or HF name, or -1. */
static int find_weight(const Weights *w, const char *name, int by_hf_name) {
    return by_hf_name ? lookup(w->by_hf_name, w->count, name) : lookup(w->by_name, w->num_named, name);
}

static int any_weight(const Weights *w, const char *prefix) {
    NameIndex key = {prefix, -1}; /* the first name >= prefix starts with it if any does */
    int lo = 0, hi = w->num_named;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (by_name(&w->by_name[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->num_named && starts_with(w->by_name[lo].name, prefix);
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

/* The check every checkpoint load makes (checkpoint_load_model), made here on the HF tensor so
 * that no imported checkpoint fails it later. */
static void require_finite(const float *v, size_t n, const char *path, const char *tensor) {
    for (size_t e = 0; e < n; e++)
        RP_CHECK(isfinite(v[e]), "%s: tensor '%s': element %zu is %g; a checkpoint must hold finite values", path,
                 tensor, e, (double)v[e]);
}

static ModelHeads detect_heads(const Weights *w, const char *dir) {
    ModelHeads h = {any_weight(w, "cls/predictions/"), any_weight(w, "bert/pooler/"), 0, any_weight(w, "qa_outputs/")};
    int c = find_weight(w, "classifier/weight", 0);
    if (c >= 0) {
        RP_CHECK(w->tensors[c]->rank == 2 && w->tensors[c]->shape[0] >= 1 && w->tensors[c]->shape[0] <= 1024,
                 "%s: tensor 'classifier.weight': expected shape [num_labels, hidden_size]", dir);
        h.num_labels = (int)w->tensors[c]->shape[0];
        /* without the pooler: BertForTokenClassification's classifier on the sequence output */
    }
    int most = h.pooler ? HF_MAX_SEQ_LABELS : HF_MAX_LABELS;
    RP_CHECK(h.num_labels <= most || h.num_labels == 1, "%s: a classifier of %d labels; realpos "
             "classifies %s into at most %d", dir, h.num_labels, h.pooler ? "sequences" : "tokens", most);
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
    const ModelConfig defaults = out->cfg.model;
    out->cfg.model = hc.model;
    /* keys HF BERT has no counterpart of keep the schema's defaults */
    out->cfg.model.t5_num_buckets = defaults.t5_num_buckets;
    out->cfg.model.t5_max_distance = defaults.t5_max_distance;
    out->cfg.model.rope_theta = defaults.rope_theta;
    DataConfig *data = &out->cfg.data;
    data->max_seq_len = data->max_seq_len < hc.model.max_position ? data->max_seq_len : hc.model.max_position;
    data->max_predictions_per_seq = data->max_predictions_per_seq < data->max_seq_len
                                        ? data->max_predictions_per_seq : data->max_seq_len;
    TaskConfig *task = &out->cfg.task;
    task->max_seq_len = task->max_seq_len < hc.model.max_position ? task->max_seq_len : hc.model.max_position;
    if (out->heads.span)
        task->type = TASK_SQUAD;
    if (out->heads.num_labels && !out->heads.pooler) { /* BertForTokenClassification: tagging */
        task->type = TASK_TAGGING;
        RP_CHECK(!hc.num_labels || hc.num_labels == out->heads.num_labels,
                 "%s: id2label has %d labels but classifier.weight has %d rows", path, hc.num_labels,
                 out->heads.num_labels);
        task->tag_labels[0] = '\0';
        for (int i = 0; i < out->heads.num_labels; i++) {
            char id[24];
            snprintf(id, sizeof id, "LABEL_%d", i);
            const char *name = hc.num_labels ? hc.labels[i] : id;
            RP_CHECK(name[0] && !strpbrk(name, " \t\n\r\v\f") && strcmp(name, "_"), "%s: id2label '%s': a tagging "
                     "label is one word, not '_'", path, name);
            size_t used = strlen(task->tag_labels), room = sizeof task->tag_labels;
            if (i)
                task->tag_labels[used++] = ' ';
            /* as a config word: %XX for the bytes a config value cannot hold (';', '#', '=', ':', '%') */
            RP_CHECK(used + config_word_encode(task->tag_labels + used, room - used, name) < room,
                     "%s: id2label too long (its labels, as key 'task.tag_labels', hold more than %zu bytes)", path,
                     room - 1);
        }
    } else if (out->heads.num_labels) {
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
            RP_CHECK(!strchr(name, ';'), "%s: key 'id2label': label \"%s\" contains ';', an INI comment character, which the INI key task.labels "
                     "cannot hold (a comment): rename it in config.json", path, name);
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
        require_finite(dst, info->count, w.shards[w.shard_of[i]].path, w.tensors[i]->name);
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
    cJSON *json = json_read_file(path, "tokenizer config");
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
    return result;
}
