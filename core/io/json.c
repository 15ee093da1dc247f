/* The JSON scanner and strict parsing over cJSON (json.h). */
#include "core/io/json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"

#define NO_KEY SIZE_MAX /* no enclosing key: the top-level value */
#define SMALL_OBJECT 16 /* objects of up to this many keys are checked pairwise, larger ones sorted */

typedef struct {
    const char *bytes; /* the key's characters: in the text, or `decoded` when it has escapes */
    size_t len;
    char *decoded;
    size_t at;         /* offset of its opening quote */
} Key;

typedef struct {
    const char *text;
    size_t len, at;
    Key *keys; /* the keys of the objects being scanned, innermost last */
    size_t num_keys, cap_keys;
    JsonMember *member;
    size_t first_nul;
    JsonError *error;
} Scan;

static int fail(Scan *s, JsonErrorKind kind, size_t at, const char *format, ...) {
    s->error->kind = kind;
    s->error->at = at;
    va_list args;
    va_start(args, format);
    vsnprintf(s->error->message, sizeof s->error->message, format, args);
    va_end(args);
    return 0;
}

static void skip_space(Scan *s) {
    while (s->at < s->len && (s->text[s->at] == ' ' || s->text[s->at] == '\t' || s->text[s->at] == '\n' ||
                              s->text[s->at] == '\r'))
        s->at++;
}

static int hex4(const char *p, unsigned *value) {
    *value = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return 0;
        *value = *value << 4 | (unsigned)d;
    }
    return 1;
}

static const char *describe(Scan *s, size_t at, char *buf, size_t size) {
    if (at >= s->len)
        return "the end of the text";
    unsigned char c = (unsigned char)s->text[at];
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

/* A string token at s->at (its opening quote); its span is [start, s->at) afterwards. */
static int scan_string(Scan *s, int *escaped) {
    size_t start = s->at++;
    *escaped = 0;
    for (;;) {
        const char *p = s->text + s->at, *end = s->text + s->len;
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
            p++;
        s->at = (size_t)(p - s->text);
        if (p == end)
            return fail(s, JSON_ERROR_SYNTAX, start, "a string that never ends");
        if (*p == '"') {
            s->at++;
            return 1;
        }
        if (*p != '\\')
            return fail(s, JSON_ERROR_SYNTAX, s->at, "raw control character 0x%02x in a string (it must be escaped)",
                        (unsigned char)*p);
        *escaped = 1;
        if (s->at + 1 >= s->len)
            return fail(s, JSON_ERROR_SYNTAX, start, "a string that never ends");
        char c = s->text[s->at + 1];
        if (c == 'u') {
            unsigned cp;
            if (s->at + 6 > s->len || !hex4(s->text + s->at + 2, &cp))
                return fail(s, JSON_ERROR_SYNTAX, s->at, "'\\u' not followed by 4 hexadecimal digits");
            if (cp == 0 && s->at < s->first_nul)
                s->first_nul = s->at;
            s->at += 6;
        } else if (strchr("\"\\/bfnrt", c) && c) {
            s->at += 2;
        } else {
            char buf[16];
            return fail(s, JSON_ERROR_SYNTAX, s->at, "invalid escape: backslash then %s", describe(s, s->at + 1, buf, sizeof buf));
        }
    }
}

static int scan_number(Scan *s) {
    size_t start = s->at;
    const char *t = s->text;
#define DIGITS(n) while (s->at < s->len && t[s->at] >= '0' && t[s->at] <= '9') (s->at++, (n)++)
    int n = 0;
    if (t[s->at] == '-')
        s->at++;
    if (s->at < s->len && t[s->at] == '0')
        s->at++, n = 1;
    else
        DIGITS(n);
    if (!n)
        return fail(s, JSON_ERROR_SYNTAX, start, "a number without digits");
    if (s->at < s->len && t[s->at] == '.') {
        s->at++, n = 0;
        DIGITS(n);
        if (!n)
            return fail(s, JSON_ERROR_SYNTAX, start, "a number with no digit after its '.'");
    }
    if (s->at < s->len && (t[s->at] == 'e' || t[s->at] == 'E')) {
        s->at++, n = 0;
        if (s->at < s->len && (t[s->at] == '+' || t[s->at] == '-'))
            s->at++;
        DIGITS(n);
        if (!n)
            return fail(s, JSON_ERROR_SYNTAX, start, "a number with no digit in its exponent");
    }
#undef DIGITS
    return 1;
}

static int same_key(const Key *a, const Key *b) { return a->len == b->len && !memcmp(a->bytes, b->bytes, a->len); }

static int by_bytes(const void *pa, const void *pb) {
    const Key *a = pa, *b = pb;
    int c = memcmp(a->bytes, b->bytes, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Keys [first, num_keys) are one object's: fail at the second occurrence of a repeated one. */
static int unique_keys(Scan *s, size_t first, size_t where_index) {
    size_t n = s->num_keys - first;
    const Key *repeated = NULL, *where = where_index == NO_KEY ? NULL : &s->keys[where_index];
    Key later;
    if (n <= SMALL_OBJECT) {
        for (size_t i = first + 1; i < s->num_keys && !repeated; i++)
            for (size_t j = first; j < i && !repeated; j++)
                if (same_key(&s->keys[i], &s->keys[j]))
                    repeated = &s->keys[i];
    } else {
        Key *sorted = xmalloc(n * sizeof *sorted);
        memcpy(sorted, s->keys + first, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, by_bytes);
        for (size_t i = 1; i < n && !repeated; i++)
            if (same_key(&sorted[i], &sorted[i - 1])) { /* the later of the two in the text */
                later = sorted[i].at > sorted[i - 1].at ? sorted[i] : sorted[i - 1];
                repeated = &later;
            }
        free(sorted);
    }
    if (!repeated)
        return 1;
    return fail(s, JSON_ERROR_DUPLICATE_KEY, repeated->at, "key '%.*s' appears twice in %s%.*s%s", (int)(repeated->len < 100 ? repeated->len : 100),
                repeated->bytes, where ? "the object of key '" : "the top-level object", where ? (int)(where->len < 100 ? where->len : 100) : 0,
                where ? where->bytes : "", where ? "'" : "");
}

static void pop_keys(Scan *s, size_t first) {
    while (s->num_keys > first)
        free(s->keys[--s->num_keys].decoded);
}

static JsonKind scan_value(Scan *s, int depth, size_t where);

static JsonKind scan_object(Scan *s, int depth, size_t where) {
    size_t first = s->num_keys;
    s->at++; /* '{' */
    skip_space(s);
    int ok = 1;
    if (s->at < s->len && s->text[s->at] == '}') {
        s->at++;
        return JSON_OBJECT;
    }
    char buf[16];
    for (;;) {
        if (s->at >= s->len || s->text[s->at] != '"') {
            ok = fail(s, JSON_ERROR_SYNTAX, s->at, "expected a key (a string), got %s", describe(s, s->at, buf, sizeof buf));
            break;
        }
        size_t key_at = s->at;
        int escaped;
        if (!(ok = scan_string(s, &escaped)))
            break;
        if (s->num_keys == s->cap_keys) {
            s->cap_keys = s->cap_keys ? 2 * s->cap_keys : 32;
            Key *grown = realloc(s->keys, s->cap_keys * sizeof *s->keys);
            RP_CHECK(grown, "out of memory reading JSON (%zu keys)", s->cap_keys);
            s->keys = grown;
        }
        Key *k = &s->keys[s->num_keys++];
        *k = (Key){s->text + key_at + 1, s->at - key_at - 2, NULL, key_at};
        if (escaped) {
            k->decoded = xmalloc(s->at - key_at);
            k->len = json_string_decode(s->text + key_at, s->at - key_at, k->decoded);
            k->bytes = k->decoded;
        }
        skip_space(s);
        if (s->at >= s->len || s->text[s->at] != ':') {
            ok = fail(s, JSON_ERROR_SYNTAX, s->at, "expected ':' after a key, got %s", describe(s, s->at, buf, sizeof buf));
            break;
        }
        s->at++;
        skip_space(s);
        size_t value_at = s->at;
        JsonKind kind = scan_value(s, depth + 1, s->num_keys - 1);
        if (!(ok = kind != JSON_INVALID))
            break;
        k = &s->keys[s->num_keys - 1]; /* the array may have moved */
        if (depth == 0 && s->member && s->member->name_len == k->len && !memcmp(s->member->name, k->bytes, k->len))
            *s->member = (JsonMember){s->member->name, s->member->name_len, kind, value_at, s->at - value_at};
        skip_space(s);
        if (s->at < s->len && s->text[s->at] == ',') {
            s->at++;
            skip_space(s);
            continue;
        }
        if (s->at < s->len && s->text[s->at] == '}') {
            s->at++;
            break;
        }
        ok = fail(s, JSON_ERROR_SYNTAX, s->at, "expected ',' or '}' in an object, got %s", describe(s, s->at, buf, sizeof buf));
        break;
    }
    ok = ok && unique_keys(s, first, where);
    pop_keys(s, first);
    return ok ? JSON_OBJECT : JSON_INVALID;
}

static JsonKind scan_array(Scan *s, int depth, size_t where) {
    s->at++; /* '[' */
    skip_space(s);
    if (s->at < s->len && s->text[s->at] == ']') {
        s->at++;
        return JSON_ARRAY;
    }
    char buf[16];
    for (;;) {
        if (!scan_value(s, depth + 1, where))
            return JSON_INVALID;
        skip_space(s);
        if (s->at < s->len && s->text[s->at] == ',') {
            s->at++;
            skip_space(s);
        } else if (s->at < s->len && s->text[s->at] == ']') {
            s->at++;
            return JSON_ARRAY;
        } else {
            return fail(s, JSON_ERROR_SYNTAX, s->at, "expected ',' or ']' in an array, got %s", describe(s, s->at, buf, sizeof buf));
        }
    }
}

static JsonKind scan_value(Scan *s, int depth, size_t where) {
    char buf[16];
    if (depth > JSON_MAX_DEPTH)
        return fail(s, JSON_ERROR_SYNTAX, s->at, "nested deeper than %d levels", JSON_MAX_DEPTH);
    if (s->at >= s->len)
        return fail(s, JSON_ERROR_SYNTAX, s->at, "expected a value, got the end of the text");
    int escaped;
    switch (s->text[s->at]) {
    case '{':
        return scan_object(s, depth, where);
    case '[':
        return scan_array(s, depth, where);
    case '"':
        return scan_string(s, &escaped) ? JSON_STRING : JSON_INVALID;
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t n = strlen(words[i]);
            if (s->len - s->at >= n && !memcmp(s->text + s->at, words[i], n)) {
                s->at += n;
                return JSON_LITERAL;
            }
        }
        break;
    }
    default:
        if (s->text[s->at] == '-' || (s->text[s->at] >= '0' && s->text[s->at] <= '9'))
            return scan_number(s) ? JSON_NUMBER : JSON_INVALID;
    }
    return fail(s, JSON_ERROR_SYNTAX, s->at, "expected a value, got %s", describe(s, s->at, buf, sizeof buf));
}

JsonKind json_check(const char *text, size_t len, JsonMember *member, size_t *first_nul, JsonError *error) {
    JsonError ignored;
    Scan s = {.text = text, .len = len, .member = member, .first_nul = len, .error = error ? error : &ignored};
    if (member)
        member->kind = JSON_INVALID;
    skip_space(&s);
    JsonKind kind = scan_value(&s, 0, NO_KEY);
    if (kind) {
        skip_space(&s);
        if (s.at < len)
            kind = (JsonKind)fail(&s, JSON_ERROR_TRAILING, s.at, "data after the JSON value");
    }
    pop_keys(&s, 0);
    free(s.keys);
    if (first_nul)
        *first_nul = s.first_nul;
    return kind;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)), out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A \uXXXX escape at p (of the n bytes left): the code point, a surrogate pair combined, a lone
 * half of one U+FFFD (*lone = 1); *used = 6 or 12 bytes. */
static unsigned unicode_escape(const char *p, size_t n, size_t *used, int *lone) {
    unsigned cp, low;
    hex4(p + 2, &cp);
    *used = 6;
    *lone = 0;
    if (cp < 0xD800 || cp > 0xDFFF)
        return cp;
    if (cp <= 0xDBFF && n >= 12 && p[6] == '\\' && p[7] == 'u' && hex4(p + 8, &low) && low >= 0xDC00 && low <= 0xDFFF) {
        *used = 12;
        return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    *lone = 1;
    return 0xFFFD;
}

size_t json_string_decode(const char *text, size_t len, char *out) {
    size_t n = 0;
    for (size_t i = 1; i + 1 < len;) {
        const char *p = memchr(text + i, '\\', len - 1 - i);
        size_t run = p ? (size_t)(p - text) - i : len - 1 - i;
        memcpy(out + n, text + i, run);
        n += run, i += run;
        if (!p)
            break;
        char c = text[i + 1];
        if (c == 'u') {
            size_t used;
            int lone;
            n += put_utf8(out + n, unicode_escape(text + i, len - 1 - i, &used, &lone));
            i += used;
            continue;
        }
        out[n++] = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
        i += 2;
    }
    return n;
}

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

/* Every lone surrogate escape of a checked text rewritten in place as \uFFFD (same length), the
 * reading json_string_decode gives it; cJSON refuses them. */
static void replace_lone_surrogates(char *text, size_t len) {
    for (char *p = memchr(text, '\\', len); p; p = memchr(p, '\\', (size_t)(text + len - p))) {
        if (p[1] != 'u') {
            p += 2;
            continue;
        }
        size_t used;
        int lone;
        unicode_escape(p, (size_t)(text + len - p), &used, &lone);
        if (lone)
            memcpy(p + 2, "FFFD", 4);
        p += used;
    }
}

cJSON *json_parse_strict(const char *text, size_t len, const char *path, const char *what) {
    JsonError error;
    size_t nul;
    int line, column;
    if (!json_check(text, len, NULL, &nul, &error)) {
        locate(text, error.at, &line, &column);
        if (error.kind == JSON_ERROR_TRAILING) {
            int shown = len - error.at < 20 ? (int)(len - error.at) : 20;
            RP_FATAL("%s: %s: unexpected data after the JSON value at line %d, column %d: '%.*s'", path, what, line,
                     column, shown, text + error.at);
        }
        if (error.kind == JSON_ERROR_DUPLICATE_KEY)
            RP_FATAL("%s: %s: %s (line %d, column %d; JSON readers disagree on which value counts: remove one)", path,
                     what, error.message, line, column);
        RP_FATAL("%s: %s: not valid JSON (error at line %d, column %d: %s)", path, what, line, column, error.message);
    }
    locate(text, nul, &line, &column);
    RP_CHECK(nul == len, "%s: %s: a \\u0000 escape (the NUL character) in a string at line %d, column %d: not "
             "accepted in this file", path, what, line, column);
    char *copy = xmalloc(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    replace_lone_surrogates(copy, len);
    cJSON *json = cJSON_ParseWithLength(copy, len);
    free(copy);
    RP_CHECK(json, "%s: %s: not valid JSON (cJSON refused what the checks accepted)", path, what);
    return json;
}

cJSON *json_read_file(const char *path, const char *what) {
    size_t len;
    char *text = read_file(path, &len, what);
    cJSON *json = json_parse_strict(text, len, path, what);
    free(text);
    return json;
}
