/* The settings that shape a shard set, recorded and compared by name (shard_settings.h). */
#include "train/data/shard_settings.h"

#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "train/data/shard.h"

static const char *const corpus_format_names[] = {"auto", "text", "jsonl"};

/* One setting: its key and its value in d as a JSON value. */
typedef struct {
    const char *key;
    cJSON *(*value)(const DataConfig *d);
} ShapingSetting;

static cJSON *corpus(const DataConfig *d) {
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; i < d->num_corpus; i++)
        cJSON_AddItemToArray(list, cJSON_CreateString(d->corpus[i]));
    return list;
}

static cJSON *corpus_format(const DataConfig *d) {
    int k = (int)d->corpus_format;
    return cJSON_CreateString(k >= 0 && k < 3 ? corpus_format_names[k] : "?");
}

static cJSON *text_field(const DataConfig *d) { return cJSON_CreateString(d->text_field); }
static cJSON *do_lower_case(const DataConfig *d) { return cJSON_CreateString(d->do_lower_case ? "yes" : "no"); }
static cJSON *eval_fraction(const DataConfig *d) {
    char text[32];
    format_float(text, sizeof text, d->eval_fraction);
    return cJSON_CreateString(text);
}

static cJSON *int64_text(int64_t v) {
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)v);
    return cJSON_CreateString(text);
}

static cJSON *seed(const DataConfig *d) { return int64_text(d->seed); }
static cJSON *shard_tokens(const DataConfig *d) { return int64_text(d->shard_tokens); }

static const ShapingSetting SHAPING_SETTINGS[] = {
    {"data.corpus", corpus},         {"data.corpus_format", corpus_format},
    {"data.text_field", text_field}, {"data.do_lower_case", do_lower_case},
    {"data.eval_fraction", eval_fraction}, {"data.seed", seed},
    {"data.shard_tokens", shard_tokens},
};
enum { NUM_SHAPING = sizeof SHAPING_SETTINGS / sizeof *SHAPING_SETTINGS };
#define VOCAB_KEY "data.vocab"

static cJSON *vocab_value(const char *md5) {
    char text[48];
    snprintf(text, sizeof text, "md5 %s", md5);
    return cJSON_CreateString(text);
}

cJSON *shard_settings_record(const DataConfig *d, const char *vocab_md5) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < NUM_SHAPING; i++)
        cJSON_AddItemToObject(o, SHAPING_SETTINGS[i].key, SHAPING_SETTINGS[i].value(d));
    if (vocab_md5)
        cJSON_AddItemToObject(o, VOCAB_KEY, vocab_value(vocab_md5));
    return o;
}

/* A value as the config would print it: a string bare, a list of strings space-separated. */
static void value_text(const cJSON *v, char *out, size_t size) {
    if (cJSON_IsString(v)) {
        snprintf(out, size, "%s", v->valuestring);
    } else if (cJSON_IsArray(v)) {
        size_t len = 0;
        const cJSON *e;
        out[0] = '\0';
        cJSON_ArrayForEach(e, v) {
            int n = snprintf(out + len, size - len, "%s%s", len ? " " : "",
                             cJSON_IsString(e) ? e->valuestring : "?");
            len = n > 0 && (size_t)n < size - len ? len + (size_t)n : size - 1;
        }
        if (!v->child)
            snprintf(out, size, "(none)");
    } else {
        char *text = cJSON_PrintUnformatted(v);
        snprintf(out, size, "%s", text ? text : "?");
        cJSON_free(text);
    }
}

static void append(char *out, size_t size, size_t *len, const char *key, const cJSON *was,
                   const cJSON *now, const char *recorded_by) {
    char a[1024], b[1024];
    value_text(was, a, sizeof a);
    value_text(now, b, sizeof b);
    if (*len + 1 >= size)
        return;
    int n = snprintf(out + *len, size - *len, "\n  key '%s': %s has %s, this config %s", key,
                     recorded_by, a, b);
    if (n < 0 || (size_t)n >= size - *len) { /* the list goes on past the buffer: say so */
        *len = size - 1;
        if (size > 5)
            memcpy(out + size - 5, "\n...", 5);
    } else {
        *len += (size_t)n;
    }
}

int shard_settings_differences(const DataConfig *d, const char *vocab_md5, const cJSON *recorded,
                               const char *recorded_by, char *out, size_t size) {
    cJSON *now = shard_settings_record(d, vocab_md5);
    size_t len = strlen(out);
    int differences = 0;
    const cJSON *mine;
    cJSON_ArrayForEach(mine, now) {
        const cJSON *was = cJSON_GetObjectItemCaseSensitive(recorded, mine->string);
        if (!was || cJSON_Compare(was, mine, 1) || (!strcmp(mine->string, "data.corpus") && d->num_corpus == 0))
            continue; /* a config without a corpus (one that only trains on the set) claims none */
        differences++;
        append(out, size, &len, mine->string, was, mine, recorded_by);
    }
    cJSON_Delete(now);
    return differences;
}

void shard_settings_init(SetSettings *s, const DataConfig *data, const char *vocab_md5, int vocab_size) {
    s->data = data;
    memcpy(s->vocab_md5, vocab_md5, 33);
    s->vocab_size = vocab_size;
    char fraction[32], text[CONFIG_PATH_MAX + 256];
    format_float(fraction, sizeof fraction, data->eval_fraction);
    int n = snprintf(text, sizeof text, "%s|%s|%d|%d|%lld|%s|%d|%s|%lld", SHARD_SET_FORMAT,
                     vocab_md5, vocab_size, data->do_lower_case, (long long)data->seed, fraction,
                     (int)data->corpus_format, data->text_field, (long long)data->shard_tokens);
    snprintf(s->prepare_id, sizeof s->prepare_id, "%016llx",
             (unsigned long long)hash_bytes(text, (size_t)n));
}

void shard_settings_source_stem(char out[18], const SetSettings *s, const char *path) {
    uint64_t id = strtoull(s->prepare_id, NULL, 16);
    snprintf(out, 18, "s%016llx", (unsigned long long)hash64(id ^ hash_bytes(path, strlen(path))));
}
