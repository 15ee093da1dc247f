/* Typed values of a schema row: what a key accepts, parsing a value into its field, printing it
 * back, and finding a row by section and name. Defaults are INI text parsed like any other
 * value, and error messages are generated from the row. */
#include "core/config/config_schema.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/common.h"

/* Longest string or path value: keeps "longest_key = value" within inih's line buffer
 * (INI_MAX_LINE, which counts '\r', '\n' and '\0'), so config_schema_to_ini output always parses back. */
#define VALUE_TEXT_MAX 160
_Static_assert(CONFIG_KEY_NAME_MAX + 3 + VALUE_TEXT_MAX + 3 <= INI_MAX_LINE, "values must fit a line");
_Static_assert(VALUE_TEXT_MAX < CONFIG_PATH_MAX, "a value must fit a path field");
#define LIST_WRAP_COLUMN 100 /* path and word lists longer than this continue on indented lines */

void config_describe_expected(const KeySpec *key, char *out, size_t size) {
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64:
        if (key->int_max == INT_MAX || key->int_max == INT64_MAX)
            snprintf(out, size, "an integer >= %lld", (long long)key->int_min);
        else
            snprintf(out, size, "an integer in [%lld, %lld]", (long long)key->int_min,
                     (long long)key->int_max);
        break;
    case KEY_FLOAT:
        if (isinf(key->float_max))
            snprintf(out, size, "a number %s %g", key->min_open ? ">" : ">=", key->float_min);
        else
            snprintf(out, size, "a number in %c%g, %g%c", key->min_open ? '(' : '[', key->float_min,
                     key->float_max, key->max_open ? ')' : ']');
        break;
    case KEY_BOOL: snprintf(out, size, "one of " SWITCH_VALUES); break;
    case KEY_ENUM: {
        size_t used = (size_t)snprintf(out, size, "one of");
        for (int i = 0; key->names[i] && used < size; i++)
            used += (size_t)snprintf(out + used, size - used, "%s %s", i ? "," : "", key->names[i]);
        break;
    }
    case KEY_STRING:
        snprintf(out, size, "a path of at most %d characters without ';'%s", VALUE_TEXT_MAX,
                 key->nonempty ? ", not empty" : "");
        break;
    case KEY_WORDS:
        snprintf(out, size, "space-separated words without ';', '=' or ':', at most %d characters in all",
                 CONFIG_PATH_MAX - 1);
        break;
    case KEY_PATHS:
        snprintf(out, size, "up to %d space-separated paths of at most %d characters without ';', "
                 "'=' or ':'", CONFIG_MAX_FILES, VALUE_TEXT_MAX);
        break;
    }
}

static bool parse_integer(const char *text, int64_t *out) {
    if (!*text || isspace((unsigned char)*text))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    *out = v;
    return errno == 0 && *end == '\0';
}

static bool parse_float(const char *text, float *out) {
    double v;
    if (!parse_decimal(text, &v))
        return false;
    *out = (float)v;  // beyond float's range: inf, or 0 / subnormal for a non-zero value: refused
    return isfinite(*out) && (v == 0 || fabsf(*out) >= FLT_MIN);
}

static bool in_float_range(const KeySpec *key, float v) {
    bool above = key->min_open ? v > key->float_min : v >= key->float_min;
    bool below = key->max_open ? v < key->float_max : v <= key->float_max;
    return above && below;
}

static bool valid_path_text(const char *text, size_t length, bool in_list) {
    if (length > VALUE_TEXT_MAX || (in_list && text[0] == '#'))
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == 0x7f || c == ';' || (in_list && (c == '=' || c == ':')))
            return false;
    }
    return true;
}

/* The next whitespace-separated word of *s (its length in *length), advancing *s past it; NULL at the
 * end: the words of a path or word list. */
static const char *next_word(const char **s, size_t *length) {
    const char *word = *s + strspn(*s, " \t\r\n\v\f");
    *length = strcspn(word, " \t\r\n\v\f");
    *s = word + *length;
    return *length ? word : NULL;
}

bool config_set_value(void *values, const KeySpec *key, const char *text, bool append, char *why,
                      size_t why_size) {
    void *field = (char *)values + key->offset;
    char expected[256];
    config_describe_expected(key, expected, sizeof expected);
    bool ok = false;
    switch (key->type) {
    case KEY_INT:
    case KEY_INT64: {
        int64_t v;
        ok = parse_integer(text, &v) && v >= key->int_min && v <= key->int_max;
        if (ok && key->type == KEY_INT)
            *(int *)field = (int)v;
        else if (ok)
            *(int64_t *)field = v;
        break;
    }
    case KEY_FLOAT: {
        float v;
        ok = parse_float(text, &v) && in_float_range(key, v);
        if (ok)
            *(float *)field = v;
        break;
    }
    case KEY_BOOL:
        ok = parse_switch(text, (int *)field);
        break;
    case KEY_ENUM:
        for (int i = 0; key->names[i] && !ok; i++)
            if (!strcmp(text, key->names[i])) {
                *(int *)field = i;
                ok = true;
            }
        break;
    case KEY_STRING:
        ok = valid_path_text(text, strlen(text), false) && (*text || !key->nonempty);
        if (ok) {
            memset(field, 0, CONFIG_PATH_MAX); /* whole field, so equal configs compare equal */
            memcpy(field, text, strlen(text));
        }
        break;
    case KEY_WORDS: { /* words joined by one space; an indented line (append) adds more */
        char *words = field, joined[CONFIG_PATH_MAX];
        size_t used = 0;
        if (append)
            used = (size_t)snprintf(joined, sizeof joined, "%s", words);
        ok = true;
        size_t length;
        for (const char *s = text, *word; ok && (word = next_word(&s, &length));) {
            ok = valid_path_text(word, length, true) && used + (used > 0) + length < sizeof joined;
            if (ok)
                used += (size_t)snprintf(joined + used, sizeof joined - used, "%s%.*s", used ? " " : "", (int)length,
                                         word);
        }
        if (ok) {
            memset(field, 0, CONFIG_PATH_MAX); /* whole field, so equal configs compare equal */
            memcpy(field, joined, used);
        }
        break;
    }
    case KEY_PATHS: {
        char(*paths)[CONFIG_PATH_MAX] = field;
        int *count = (int *)((char *)values + key->count_offset);
        if (!append) {
            memset(paths, 0, CONFIG_MAX_FILES * sizeof paths[0]);
            *count = 0;
        }
        ok = true;
        size_t length;
        for (const char *s = text, *word; ok && (word = next_word(&s, &length));) {
            ok = *count < CONFIG_MAX_FILES && valid_path_text(word, length, true);
            if (ok)
                memcpy(paths[(*count)++], word, length);
        }
        break;
    }
    }
    if (!ok)
        snprintf(why, why_size, "key '%s.%s': expected %s, got '%.200s'", key->section, key->name,
                 expected, text);
    return ok;
}

/* "[a], [b], [c]" with `last` (", " or " or ") before the last section. */
static void list_sections(const ConfigSchema *schema, const char *last, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int s = 0; s < schema->num_sections && used < size; s++)
        used += (size_t)snprintf(out + used, size - used, "%s[%s]",
                                 !s ? "" : s + 1 < schema->num_sections ? ", " : last,
                                 schema->sections[s]);
}

/* Edit distance (Levenshtein, case-insensitive) of two strings, capped at `cap`. */
static int config_edit_distance(const char *a, const char *b, int cap) {
    size_t n = strlen(b);
    if (n > 63)
        return cap;
    int row[64];
    for (size_t j = 0; j <= n; j++)
        row[j] = (int)j;
    for (size_t i = 1; a[i - 1]; i++) {
        int diagonal = row[0], best = row[0] = (int)i;
        for (size_t j = 1; j <= n; j++) {
            int above = row[j];
            int substitute = diagonal + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            row[j] = substitute < above + 1 ? substitute : above + 1;
            row[j] = row[j] < row[j - 1] + 1 ? row[j] : row[j - 1] + 1;
            diagonal = above;
            best = row[j] < best ? row[j] : best;
        }
        if (best >= cap)
            return cap;
    }
    return row[n] < cap ? row[n] : cap;
}

/* "; did you mean 'train.max_steps'?" for the schema keys nearest to section.name: the same name
 * in other sections, else the keys within a small edit distance; "" if none is near. */
static void suggest_keys(const ConfigSchema *schema, const char *section, const char *name, char *out, size_t size) {
    char wanted[2 * CONFIG_KEY_NAME_MAX + 2], candidate[sizeof wanted + CONFIG_KEY_NAME_MAX];
    snprintf(wanted, sizeof wanted, "%s.%s", section, name);
    int cap = (int)strlen(wanted) / 4 + 1, best = cap; /* 1 edit per 4 characters, as a typo is */
    bool same_name = false;
    for (int k = 0; k < schema->num_keys; k++)
        same_name |= !strcmp(schema->keys[k].name, name);
    for (int k = 0; k < schema->num_keys; k++) {
        snprintf(candidate, sizeof candidate, "%s.%s", schema->keys[k].section, schema->keys[k].name);
        int d = same_name ? (strcmp(schema->keys[k].name, name) ? cap : 0) : config_edit_distance(wanted, candidate, cap);
        best = d < best ? d : best;
    }
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0, n = 0; best < cap && k < schema->num_keys && used < size; k++) {
        snprintf(candidate, sizeof candidate, "%s.%s", schema->keys[k].section, schema->keys[k].name);
        int d = same_name ? (strcmp(schema->keys[k].name, name) ? cap : 0) : config_edit_distance(wanted, candidate, cap);
        if (d == best)
            used += (size_t)snprintf(out + used, size - used, "%s'%s'", n++ ? " or " : "did you mean ", candidate);
    }
    if (out[0] && used < size)
        snprintf(out + used, size - used, "? ");
}

int config_find_key(const ConfigSchema *schema, const char *section, const char *name, char *why,
                    size_t why_size) {
    bool known_section = false;
    for (int s = 0; s < schema->num_sections; s++)
        known_section |= !strcmp(section, schema->sections[s]);
    char sections[256], suggestion[256];
    if (!*section) {
        list_sections(schema, " or ", sections, sizeof sections);
        snprintf(why, why_size, "key '%s': expected it under a [section] header (%s), got it "
                 "before the first header", name, sections);
        return -1;
    }
    const KeySpec *keys = schema->keys;
    for (int k = 0; known_section && k < schema->num_keys; k++)
        if (!strcmp(section, keys[k].section) && !strcmp(name, keys[k].name))
            return k;
    suggest_keys(schema, section, name, suggestion, sizeof suggestion);
    if (!known_section) {
        list_sections(schema, ", ", sections, sizeof sections);
        snprintf(why, why_size, "key '%s.%s': %sexpected a section among %s, got [%s]", section,
                 name, suggestion, sections, section);
        return -1;
    }
    size_t used = (size_t)snprintf(why, why_size, "key '%s.%s': %sexpected one of", section, name, suggestion);
    for (int k = 0, first = 1; k < schema->num_keys && used < why_size; k++)
        if (!strcmp(section, keys[k].section)) {
            used += (size_t)snprintf(why + used, why_size - used, "%s %s", first ? "" : ",",
                                     keys[k].name);
            first = 0;
        }
    if (used < why_size)
        snprintf(why + used, why_size - used, ", got '%s'", name);
    return -1;
}
/* " word" of a path or word list at *column, first on an indented line of its own when it would
 * pass LIST_WRAP_COLUMN (never the list's first word) */
static void write_list_word(FILE *out, size_t *column, const char *word, size_t length, int first) {
    if (!first && *column + 1 + length > LIST_WRAP_COLUMN) {
        fprintf(out, "\n   "); /* an indented line continues the list */
        *column = 3;
    }
    fprintf(out, " %.*s", (int)length, word);
    *column += 1 + length;
}


void config_print_value(FILE *out, const void *values, const KeySpec *key) {
    const void *field = (const char *)values + key->offset;
    char number[64];
    switch (key->type) {
    case KEY_INT: fprintf(out, " %d", *(const int *)field); break;
    case KEY_INT64: fprintf(out, " %lld", (long long)*(const int64_t *)field); break;
    case KEY_FLOAT:
        format_float(number, sizeof number, *(const float *)field);
        fprintf(out, " %s", number);
        break;
    case KEY_BOOL: fprintf(out, " %s", *(const int *)field ? "yes" : "no"); break;
    case KEY_ENUM: fprintf(out, " %s", key->names[*(const int *)field]); break;
    case KEY_STRING:
        if (*(const char *)field)
            fprintf(out, " %s", (const char *)field);
        break;
    case KEY_WORDS: {
        size_t column = strlen(key->name) + 2, length;
        int first = 1;
        for (const char *s = field, *word; (word = next_word(&s, &length)); first = 0)
            write_list_word(out, &column, word, length, first);
        break;
    }
    case KEY_PATHS: {
        const char(*paths)[CONFIG_PATH_MAX] = field;
        int count = *(const int *)((const char *)values + key->count_offset);
        size_t column = strlen(key->name) + 2;
        for (int i = 0; i < count; i++) {
            size_t length = strlen(paths[i]);
            write_list_word(out, &column, paths[i], length, i == 0);
        }
        break;
    }
    }
}


bool config_values_equal(const KeySpec *key, const void *a, const void *b) {
    const char *x = (const char *)a + key->offset, *y = (const char *)b + key->offset;
    switch (key->type) {
    case KEY_INT:
    case KEY_BOOL:
    case KEY_ENUM: return *(const int *)x == *(const int *)y;
    case KEY_INT64: return *(const int64_t *)x == *(const int64_t *)y;
    case KEY_FLOAT: return *(const float *)x == *(const float *)y; /* -0 = 0 */
    case KEY_STRING:
    case KEY_WORDS: return !strcmp(x, y);
    case KEY_PATHS: {
        int count = *(const int *)((const char *)a + key->count_offset);
        if (count != *(const int *)((const char *)b + key->count_offset))
            return false;
        for (int i = 0; i < count; i++)
            if (strcmp(x + (size_t)i * CONFIG_PATH_MAX, y + (size_t)i * CONFIG_PATH_MAX))
                return false;
        return true;
    }
    }
    return false;
}

char *config_value_text(const void *values, const KeySpec *key) {
    char *text = NULL;
    size_t size;
    FILE *out = open_memstream(&text, &size);
    RP_CHECK(out, "out of memory formatting the configuration");
    config_print_value(out, values, key);
    RP_CHECK(fclose(out) == 0, "out of memory formatting the configuration");
    return text;
}

/* ---- words of any bytes ------------------------------------------------------------------------ */

size_t config_word_encode(char *out, size_t size, const char *word) {
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)word; *c; c++) {
        char piece[4] = {(char)*c, 0};
        if (*c <= 0x20 || *c == 0x7f || strchr("%;#=:", *c))
            snprintf(piece, sizeof piece, "%%%02X", *c);
        for (const char *p = piece; *p; p++, used++)
            if (used + 1 < size)
                out[used] = *p;
    }
    if (size)
        out[used < size ? used : size - 1] = '\0';
    return used;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void config_word_decode(char *out, const char *word, size_t length) {
    size_t used = 0;
    for (size_t i = 0; i < length; i++) {
        int high = -1, low = -1;
        if (word[i] == '%' && i + 2 < length) {
            high = hex_digit(word[i + 1]);
            low = high >= 0 ? hex_digit(word[i + 2]) : -1;
        }
        if (high >= 0 && low >= 0 && 16 * high + low > 0) {
            out[used++] = (char)(16 * high + low);
            i += 2;
        } else {
            out[used++] = word[i];
        }
    }
    out[used] = '\0';
}
