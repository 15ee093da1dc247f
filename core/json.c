/* Strict JSON parsing over cJSON (json.h). */
#include "core/json.h"

#include <string.h>

#include "core/common.h"

/* 1-based line and column of byte offset at in text. */
static void locate(const char *text, size_t at, int *line, int *column) {
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            ++*line;
            *column = 1;
        } else {
            ++*column;
        }
    }
}

static int by_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Fatal at the first object (depth first) holding a key twice; `where` names the enclosing key. */
static void require_unique_keys(const cJSON *item, const char *path, const char *what, const char *where) {
    if (!cJSON_IsObject(item) && !cJSON_IsArray(item))
        return;
    int n = 0;
    for (const cJSON *c = item->child; c; c = c->next)
        n++;
    if (cJSON_IsObject(item) && n > 1) {
        const cJSON **sorted = xmalloc(sizeof(cJSON *) * (size_t)n);
        int i = 0;
        for (const cJSON *c = item->child; c; c = c->next)
            sorted[i++] = c;
        qsort(sorted, (size_t)n, sizeof *sorted, by_key);
        for (i = 1; i < n; i++)
            RP_CHECK(strcmp(sorted[i - 1]->string, sorted[i]->string),
                     "%s: %s: key '%.200s' appears twice in %s%s%s (JSON readers disagree on which value counts: "
                     "remove one)", path, what, sorted[i]->string, where ? "the object of key '" : "the top-level object",
                     where ? where : "", where ? "'" : "");
        free(sorted);
    }
    for (const cJSON *c = item->child; c; c = c->next)
        require_unique_keys(c, path, what, cJSON_IsObject(item) ? c->string : where);
}

cJSON *json_parse_strict(const char *text, size_t len, const char *path, const char *what) {
    const char *end = NULL;
    cJSON *json = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    int line, column;
    if (!json) {
        const char *error = cJSON_GetErrorPtr();
        size_t at = error && error >= text && error <= text + len ? (size_t)(error - text) : 0;
        locate(text, at, &line, &column);
        RP_FATAL("%s: %s: not valid JSON (error at line %d, column %d)", path, what, line, column);
    }
    size_t at = end ? (size_t)(end - text) : len;
    while (at < len && strchr(" \t\r\n", text[at]) && text[at])
        at++;
    if (at < len) {
        locate(text, at, &line, &column);
        cJSON_Delete(json);
        int shown = len - at < 20 ? (int)(len - at) : 20;
        RP_FATAL("%s: %s: unexpected data after the JSON value at line %d, column %d: '%.*s'", path, what, line,
                 column, shown, text + at);
    }
    require_unique_keys(json, path, what, NULL);
    return json;
}

cJSON *json_read_file(const char *path, const char *what) {
    size_t len;
    char *text = read_file(path, &len, what);
    cJSON *json = json_parse_strict(text, len, path, what);
    free(text);
    return json;
}
