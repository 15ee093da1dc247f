/* Whole configurations over a schema (see config_schema.h): defaults, INI text through inih,
 * --set overrides, the origin of each key, rejection messages and the printed form. */
#include "core/config/config_parse.h"

#include <ctype.h>
#include <ini.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "core/common.h"
#include "core/config/config_use.h"
#include "core/io/files.h"

static ConfigOrigins *origins_of(const ConfigSchema *schema, void *values) {
    return (ConfigOrigins *)((char *)values + schema->origins_offset);
}

void config_schema_defaults(const ConfigSchema *schema, void *values) {
    RP_CHECK(schema->num_keys <= CONFIG_MAX_KEYS, "internal: %d schema keys, raise CONFIG_MAX_KEYS",
             schema->num_keys);
    config_check_uses(schema);
    memset(values, 0, schema->values_size);
    char why[CONFIG_MESSAGE_MAX];
    for (int k = 0; k < schema->num_keys; k++) {
        const KeySpec *key = &schema->keys[k];
        RP_CHECK(strlen(key->name) <= CONFIG_KEY_NAME_MAX, "internal: key name '%s' is longer "
                 "than CONFIG_KEY_NAME_MAX", key->name);
        RP_CHECK(config_set_value(values, key, key->fallback, false, why, sizeof why),
                 "schema default: %s", why);
    }
}

/* ---- INI text -------------------------------------------------------------------------------- */

/* State of one ini_parse_stream call. inih is built without line numbers in the handler, so the
 * reader hands it one line at a time and counts: the handler always runs for line `line`. */
typedef struct {
    const ConfigSchema *schema;
    void *values;
    const char *name;               /* file path or other origin, for messages */
    const char *text, *cursor, *end;
    int line;                       /* lines handed to inih so far */
    bool line_indented;             /* current line starts with whitespace: inih continues */
    int prev_key;                   /* schema index of the previous assignment, -1 = none */
    int set_line[CONFIG_MAX_KEYS];  /* line that assigned each key, 0 = not in this text */
    int error_line;                 /* first error found by reader or handler, 0 = none */
    char error[CONFIG_MESSAGE_MAX];
} IniParse;

static void parse_error(IniParse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void parse_error(IniParse *p, const char *fmt, ...) {
    int used = snprintf(p->error, sizeof p->error, "%s:%d: ", p->name, p->line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error + used, sizeof p->error - (size_t)used, fmt, ap);
    va_end(ap);
    p->error_line = p->line;
}

static char *read_line(char *buffer, int size, void *stream) {
    IniParse *p = stream;
    if (p->cursor >= p->end || p->error_line)
        return NULL;
    const char *newline = memchr(p->cursor, '\n', (size_t)(p->end - p->cursor));
    size_t length = newline ? (size_t)(newline - p->cursor) + 1 : (size_t)(p->end - p->cursor);
    p->line++;
    if (length + 1 > (size_t)size) {
        parse_error(p, "expected lines of at most %d characters, got %zu", size - 2,
                    length - (newline != NULL));
        return NULL;
    }
    if (memchr(p->cursor, '\0', length)) {
        parse_error(p, "expected text, got a NUL byte");
        return NULL;
    }
    memcpy(buffer, p->cursor, length);
    buffer[length] = '\0';
    p->line_indented = isspace((unsigned char)buffer[0]);
    p->cursor += length;
    return buffer;
}

static int on_assignment(void *user, const char *section, const char *name, const char *value) {
    IniParse *p = user;
    char why[CONFIG_MESSAGE_MAX];
    /* inih passes an indented line after an assignment as more value for the same name. */
    const KeySpec *prev = p->prev_key >= 0 ? &p->schema->keys[p->prev_key] : NULL;
    if (p->line_indented && prev && !strcmp(section, prev->section) && !strcmp(name, prev->name)) {
        if (prev->type != KEY_PATHS && prev->type != KEY_WORDS)
            parse_error(p, "key '%s.%s': expected a one-line value (only path and word lists continue "
                        "on indented lines), got the indented line '%.200s'", section, name, value);
        else if (strpbrk(value, "=:"))
            parse_error(p, "key '%s.%s': expected more paths on this indented line, got '%.200s' "
                        "(remove the indentation to start a new key)", section, name, value);
        else if (!config_set_value(p->values, prev, value, true, why, sizeof why))
            parse_error(p, "%s", why);
        return !p->error_line;
    }
    int k = config_find_key(p->schema, section, name, why, sizeof why);
    if (k < 0)
        parse_error(p, "%s", why);
    else if (p->set_line[k])
        parse_error(p, "key '%s.%s': expected one assignment, got a second one (the first is on "
                    "line %d)", section, name, p->set_line[k]);
    else if (!config_set_value(p->values, &p->schema->keys[k], value, false, why, sizeof why))
        parse_error(p, "%s", why);
    if (p->error_line)
        return 0;
    snprintf(origins_of(p->schema, p->values)->of[k], CONFIG_ORIGIN_MAX, "%s:%d", p->name, p->line);
    p->set_line[k] = p->line;
    p->prev_key = k;
    return 1;
}

/* Parses INI text onto values (no defaults, no cross-key checks); fatal on the first error. */
static void parse_ini(const ConfigSchema *schema, void *values, const char *text, size_t length,
                      const char *name) {
    IniParse parse = {.schema = schema, .values = values, .name = name, .text = text, .cursor = text,
                      .end = text + length, .prev_key = -1};
    IniParse *p = &parse; /* on the stack: nothing to free on the error exits below */
    int bad_line = ini_parse_stream(read_line, p, on_assignment, p);
    if (bad_line > 0 && (!p->error_line || bad_line < p->error_line)) {
        /* inih rejected the line itself: no '=' or ':', or '[' without ']'. */
        const char *s = text, *end = text + length;
        for (int line = 1; line < bad_line && s < end; line++) {
            const char *newline = memchr(s, '\n', (size_t)(end - s));
            s = newline ? newline + 1 : end;
        }
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        int shown = 0;
        while (s + shown < end && shown < 200 && s[shown] != '\r' && s[shown] != '\n')
            shown++;
        RP_FATAL("%s:%d: expected 'key = value', '[section]' or a comment, got '%.*s'", name,
                 bad_line, shown, s);
    }
    RP_CHECK(!p->error_line, "%s", p->error);
    RP_CHECK(bad_line == 0, "%s: the INI parser failed (code %d)", name, bad_line);
}

void config_schema_load_text(const ConfigSchema *schema, void *values, const char *text,
                             const char *origin, ConfigCheck check) {
    config_schema_defaults(schema, values);
    parse_ini(schema, values, text, strlen(text), origin);
    if (check)
        check(values);
}

void config_schema_load_file(const ConfigSchema *schema, void *values, const char *path,
                             int num_overrides, char *const *overrides, unsigned job, ConfigCheck check) {
    size_t length = 0;
    char *text = read_file(path, &length, "config file");
    config_schema_defaults(schema, values);
    origins_of(schema, values)->job = job;
    parse_ini(schema, values, text, length, path);
    free(text);
    for (int i = 0; i < num_overrides; i++)
        config_schema_override(schema, values, overrides[i]);
    if (check)
        check(values);
}

/* ---- overrides ------------------------------------------------------------------------------- */

/* Copy of s[0..length) without surrounding whitespace (caller frees). */
static char *trimmed_copy(const char *s, size_t length) {
    while (length && isspace((unsigned char)*s))
        s++, length--;
    while (length && isspace((unsigned char)s[length - 1]))
        length--;
    char *copy = xmalloc(length + 1);
    memcpy(copy, s, length);
    copy[length] = '\0';
    return copy;
}

/* The text with control characters shown as \n, \r, \t or \xHH (for messages). */
static void escape_controls(char *out, size_t size, const char *text) {
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && used + 5 < size; c++) {
        if (*c >= ' ' && *c != 0x7f)
            out[used++] = (char)*c;
        else
            used += (size_t)snprintf(out + used, size - used, *c == '\n' ? "\\n" : *c == '\r' ? "\\r"
                                     : *c == '\t' ? "\\t" : "\\x%02X", *c);
    }
    out[used] = '\0';
}

void config_schema_override(const ConfigSchema *schema, void *values, const char *assignment) {
    char origin[CONFIG_ORIGIN_MAX], why[CONFIG_MESSAGE_MAX], shown[CONFIG_ORIGIN_MAX - 8];
    escape_controls(shown, sizeof shown, assignment);
    snprintf(origin, sizeof origin, "--set %s", shown);
    /* a value is one line of the INI form (config.ini, the checkpoint's stored config) */
    const char *line_break = strpbrk(assignment, "\r\n");
    RP_CHECK(!line_break, "%s: expected a one-line value, got a %s at character %zu (values are single INI lines: "
             "remove it)", origin, *line_break == '\n' ? "newline" : "carriage return",
             (size_t)(line_break - assignment) + 1);
    const char *equals = strchr(assignment, '=');
    RP_CHECK(equals, "%s: expected section.key=value, got no '='", origin);
    char *key_name = trimmed_copy(assignment, (size_t)(equals - assignment));
    char *dot = strchr(key_name, '.');
    if (!dot) {
        const KeySpec *example = &schema->keys[0];
        for (int k = 0; k < schema->num_keys; k++)
            if (!strcmp(key_name, schema->keys[k].name)) {
                example = &schema->keys[k];
                break;
            }
        RP_FATAL("%s: key '%s': expected section.key (e.g. %s.%s), got no section", origin, key_name,
                 example->section, example->name);
    }
    *dot = '\0';
    int k = config_find_key(schema, key_name, dot + 1, why, sizeof why);
    RP_CHECK(k >= 0, "%s: %s", origin, why);
    char *value = trimmed_copy(equals + 1, strlen(equals + 1));
    RP_CHECK(config_set_value(values, &schema->keys[k], value, false, why, sizeof why), "%s: %s",
             origin, why);
    snprintf(origins_of(schema, values)->of[k], CONFIG_ORIGIN_MAX, "%s", origin);
    free(value);
    free(key_name);
}

/* ---- origins and rejection ------------------------------------------------------------------ */

int config_key_index(const ConfigSchema *schema, const char *section, const char *name) {
    char why[CONFIG_MESSAGE_MAX];
    int k = config_find_key(schema, section, name, why, sizeof why);
    RP_CHECK(k >= 0, "internal: %s", why);
    return k;
}

const char *config_key_origin(const ConfigSchema *schema, const void *values, int k) {
    return origins_of(schema, (void *)values)->of[k];
}

void config_reject(const ConfigSchema *schema, const void *values, int k, const char *fmt, ...) {
    char message[CONFIG_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    const char *origin = config_key_origin(schema, values, k);
    RP_FATAL("%s: key '%s.%s': %s", origin[0] ? origin : "(default)", schema->keys[k].section,
             schema->keys[k].name, message);
}

/* ---- printing -------------------------------------------------------------------------------- */

char *config_schema_to_ini(const ConfigSchema *schema, const void *values) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    RP_CHECK(out, "out of memory formatting the configuration");
    for (int k = 0; k < schema->num_keys; k++) {
        const KeySpec *key = &schema->keys[k];
        if (!k || strcmp(key->section, schema->keys[k - 1].section))
            fprintf(out, "%s[%s]\n", k ? "\n" : "", key->section);
        char expected[256];
        config_describe_expected(key, expected, sizeof expected);
        char applies[CONFIG_MESSAGE_MAX];
        config_use_comment(schema, values, k, applies, sizeof applies);
        fprintf(out, "; %s: %s\n%s%s%s =", key->help, expected, applies, applies[0] ? "\n" : "", key->name);
        config_print_value(out, values, key);
        fputc('\n', out);
    }
    RP_CHECK(fclose(out) == 0, "out of memory formatting the configuration");
    return text;
}
