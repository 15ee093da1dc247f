/* Typed, validated INI configuration (see config.h): INI text through inih, --set overrides,
 * cross-key checks and the printed form, all driven by the schema in config_schema.c. */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "core/common.h"
#include "core/config_schema.h"

void config_defaults(Config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char why[CONFIG_MESSAGE_MAX];
    for (int k = 0; k < config_num_keys; k++) {
        const KeySpec *key = &config_schema[k];
        RP_CHECK(config_set_value(cfg, key, key->fallback, false, why, sizeof why),
                 "schema default: %s", why);
    }
}

/* ---- INI text -------------------------------------------------------------------------------- */

/* State of one ini_parse_stream call. inih is built without line numbers in the handler, so the
 * reader hands it one line at a time and counts: the handler always runs for line `line`. */
typedef struct {
    Config *cfg;
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
    const KeySpec *prev = p->prev_key >= 0 ? &config_schema[p->prev_key] : NULL;
    if (p->line_indented && prev && !strcmp(section, prev->section) && !strcmp(name, prev->name)) {
        if (prev->type != KEY_PATHS)
            parse_error(p, "key '%s.%s': expected a one-line value (only path lists continue on "
                        "indented lines), got the indented line '%.200s'", section, name, value);
        else if (strpbrk(value, "=:"))
            parse_error(p, "key '%s.%s': expected more paths on this indented line, got '%.200s' "
                        "(remove the indentation to start a new key)", section, name, value);
        else if (!config_set_value(p->cfg, prev, value, true, why, sizeof why))
            parse_error(p, "%s", why);
        return !p->error_line;
    }
    int k = config_find_key(section, name, why, sizeof why);
    if (k < 0)
        parse_error(p, "%s", why);
    else if (p->set_line[k])
        parse_error(p, "key '%s.%s': expected one assignment, got a second one (the first is on "
                    "line %d)", section, name, p->set_line[k]);
    else if (!config_set_value(p->cfg, &config_schema[k], value, false, why, sizeof why))
        parse_error(p, "%s", why);
    if (p->error_line)
        return 0;
    snprintf(p->cfg->key_origin[k], CONFIG_ORIGIN_MAX, "%s:%d", p->name, p->line);
    p->set_line[k] = p->line;
    p->prev_key = k;
    return 1;
}

/* Parses INI text onto cfg (no defaults, no cross-key checks); fatal on the first error. */
static void parse_ini(Config *cfg, const char *text, size_t length, const char *name) {
    IniParse *p = xcalloc(1, sizeof *p);
    *p = (IniParse){.cfg = cfg, .name = name, .text = text, .cursor = text, .end = text + length,
                    .prev_key = -1};
    int bad_line = ini_parse_stream(read_line, p, on_assignment, p);
    if (bad_line > 0 && (!p->error_line || bad_line < p->error_line)) {
        /* inih rejected the line itself: no '=' or ':', or '[' without ']'. */
        const char *s = text;
        for (int line = 1; line < bad_line; line++)
            s = strchr(s, '\n') + 1;
        while (*s == ' ' || *s == '\t')
            s++;
        int shown = (int)strcspn(s, "\r\n");
        RP_FATAL("%s:%d: expected 'key = value', '[section]' or a comment, got '%.*s'", name,
                 bad_line, shown < 200 ? shown : 200, s);
    }
    RP_CHECK(!p->error_line, "%s", p->error);
    RP_CHECK(bad_line == 0, "%s: the INI parser failed (code %d)", name, bad_line);
    free(p);
}

void config_load_string(Config *cfg, const char *text, const char *origin) {
    config_defaults(cfg);
    parse_ini(cfg, text, strlen(text), origin);
    config_validate(cfg);
}

/* Defaults, the file and the overrides, without cross-key checks. */
static void config_load_unchecked(Config *cfg, const char *path, int num_overrides, char *const *overrides) {
    FILE *file = fopen(path, "rb");
    RP_CHECK(file, "config file '%s': cannot open (%s)", path, strerror(errno));
    size_t length = 0, capacity = 4096;
    char *text = xmalloc(capacity);
    for (size_t got; (got = fread(text + length, 1, capacity - length, file)) > 0;) {
        length += got;
        if (length == capacity) {
            capacity *= 2;
            text = realloc(text, capacity);
            RP_CHECK(text, "config file '%s': out of memory", path);
        }
    }
    RP_CHECK(!ferror(file), "config file '%s': cannot read (%s)", path, strerror(errno));
    fclose(file);
    config_defaults(cfg);
    parse_ini(cfg, text, length, path);
    free(text);
    for (int i = 0; i < num_overrides; i++)
        config_override(cfg, overrides[i]);
}

void config_load(Config *cfg, const char *path, int num_overrides, char *const *overrides) {
    config_load_unchecked(cfg, path, num_overrides, overrides);
    config_validate(cfg);
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

void config_override(Config *cfg, const char *assignment) {
    char origin[CONFIG_ORIGIN_MAX], why[CONFIG_MESSAGE_MAX];
    snprintf(origin, sizeof origin, "--set %s", assignment);
    const char *equals = strchr(assignment, '=');
    RP_CHECK(equals, "%s: expected section.key=value, got no '='", origin);
    char *key_name = trimmed_copy(assignment, (size_t)(equals - assignment));
    char *dot = strchr(key_name, '.');
    if (!dot) {
        const char *example = "model.hidden_size";
        for (int k = 0; k < config_num_keys; k++)
            if (!strcmp(key_name, config_schema[k].name)) {
                snprintf(why, sizeof why, "%s.%s", config_schema[k].section, config_schema[k].name);
                example = why;
                break;
            }
        RP_FATAL("%s: key '%s': expected section.key (e.g. %s), got no section", origin, key_name,
                 example);
    }
    *dot = '\0';
    int k = config_find_key(key_name, dot + 1, why, sizeof why);
    RP_CHECK(k >= 0, "%s: %s", origin, why);
    char *value = trimmed_copy(equals + 1, strlen(equals + 1));
    RP_CHECK(config_set_value(cfg, &config_schema[k], value, false, why, sizeof why), "%s: %s",
             origin, why);
    snprintf(cfg->key_origin[k], CONFIG_ORIGIN_MAX, "%s", origin);
    free(value);
    free(key_name);
}

/* ---- cross-key checks ------------------------------------------------------------------------ */

int config_key_is_set(const Config *cfg, const char *section, const char *name) {
    char why[CONFIG_MESSAGE_MAX];
    int k = config_find_key(section, name, why, sizeof why);
    RP_CHECK(k >= 0, "internal: %s", why);
    return cfg->key_origin[k][0] != '\0';
}

static int key_index(const char *section, const char *name) {
    char why[CONFIG_MESSAGE_MAX];
    int k = config_find_key(section, name, why, sizeof why);
    RP_CHECK(k >= 0, "internal: %s", why);
    return k;
}
#define KEY(sec, name) key_index(#sec, #name)

/* Where key k got its value: "file.ini:12", "--set ..." or "default". */
static const char *origin_of(const Config *cfg, int k) {
    return cfg->key_origin[k][0] ? cfg->key_origin[k] : "default";
}

/* Fatal: "ORIGIN: key 'section.name': <message>" for the key whose value is impossible. */
static void reject(const Config *cfg, int k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void reject(const Config *cfg, int k, const char *fmt, ...) {
    char message[CONFIG_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    const char *origin = cfg->key_origin[k][0] ? cfg->key_origin[k] : "(default)";
    RP_FATAL("%s: key '%s.%s': %s", origin, config_schema[k].section, config_schema[k].name,
             message);
}

static void validate_task(const Config *cfg) {
    const TaskConfig *k = &cfg->task;
    if (k->glue_task != GLUE_NONE && config_key_is_set(cfg, "task", "type")) {
        TaskKind implied = k->glue_task == GLUE_STSB ? TASK_REGRESSION : TASK_CLASSIFICATION;
        if (k->type != implied)
            reject(cfg, KEY(task, type), "expected %s (or no setting) for task.glue_task = %s (%s), got %s",
                   task_kind_name(implied), glue_task_name(k->glue_task), origin_of(cfg, KEY(task, glue_task)),
                   task_kind_name(k->type));
    }
    if (k->type == TASK_SQUAD) {
        if (k->max_query_length + 4 > k->max_seq_len)
            reject(cfg, KEY(task, max_query_length),
                   "expected at most task.max_seq_len - 4 = %d (%s) so that a window holds context, got %d",
                   k->max_seq_len - 4, origin_of(cfg, KEY(task, max_seq_len)), k->max_query_length);
        return;
    }
    if (k->glue_task != GLUE_NONE)
        return;
    if (k->text_b_column == k->text_a_column)
        reject(cfg, KEY(task, text_b_column), "expected a column other than task.text_a_column = %d (%s), got %d",
               k->text_a_column, origin_of(cfg, KEY(task, text_a_column)), k->text_b_column);
    if (k->label_column == k->text_a_column || k->label_column == k->text_b_column)
        reject(cfg, KEY(task, label_column), "expected a column other than the text columns, got %d",
               k->label_column);
    int highest = k->text_a_column > k->text_b_column ? k->text_a_column : k->text_b_column;
    highest = highest > k->label_column ? highest : k->label_column;
    if (k->num_columns && k->num_columns <= highest)
        reject(cfg, KEY(task, num_columns), "expected more than %d (the highest column used), got %d", highest,
               k->num_columns);
    if (k->type == TASK_CLASSIFICATION) {
        int count = 0;
        for (const char *s = k->labels; *s;) {
            s += strspn(s, " \t");
            size_t n = strcspn(s, " \t");
            count += n > 0;
            s += n;
        }
        if (count < 2)
            reject(cfg, KEY(task, labels), "expected at least two space-separated label values, got '%s'",
                   k->labels);
    }
}

static void validate_model_and_data(const Config *cfg);

void config_validate(const Config *cfg) {
    validate_model_and_data(cfg);
    const TrainConfig *t = &cfg->train;
    if (t->warmup_steps > t->max_steps)
        reject(cfg, KEY(train, warmup_steps), "expected at most train.max_steps = %d (%s), got %d",
               t->max_steps, origin_of(cfg, KEY(train, max_steps)), t->warmup_steps);
    validate_task(cfg);
}

void config_load_task(Config *cfg, const char *path, int num_overrides, char *const *overrides) {
    config_load_unchecked(cfg, path, num_overrides, overrides);
    validate_task(cfg);
}

static void validate_model_and_data(const Config *cfg) {
    const ModelConfig *m = &cfg->model;
    const DataConfig *d = &cfg->data;
    if (m->hidden_size % m->num_heads)
        reject(cfg, KEY(model, num_heads),
               "expected a divisor of model.hidden_size = %d (%s), got %d", m->hidden_size,
               origin_of(cfg, KEY(model, hidden_size)), m->num_heads);
    if (m->residual_attention_mean && !m->residual_attention)
        reject(cfg, KEY(model, residual_attention_mean),
               "expected no while model.residual_attention = no (%s), got yes",
               origin_of(cfg, KEY(model, residual_attention)));
    if (m->absolute_position && d->max_seq_len > m->max_position)
        reject(cfg, KEY(data, max_seq_len),
               "expected at most model.max_position = %d (%s) while model.absolute_position = yes "
               "(%s), got %d", m->max_position, origin_of(cfg, KEY(model, max_position)),
               origin_of(cfg, KEY(model, absolute_position)), d->max_seq_len);
    if (d->max_predictions_per_seq > d->max_seq_len)
        reject(cfg, KEY(data, max_predictions_per_seq),
               "expected at most data.max_seq_len = %d (%s), got %d", d->max_seq_len,
               origin_of(cfg, KEY(data, max_seq_len)), d->max_predictions_per_seq);
}

/* ---- fine-tuning: the checkpoint's model with the allowed changes ----------------------------- */

static const char *const adjustable_model_keys[] = {
    "relative_position", "relative_k", "residual_attention", "residual_attention_mean", "max_position",
    "hidden_dropout", "attention_dropout", "init_range", "seed"};

void config_adopt_model(Config *cfg, const Config *stored_config, const char *origin) {
    const ModelConfig *stored = &stored_config->model;
    Config merged = *cfg;
    merged.model = *stored;
    for (int k = 0; k < config_num_keys; k++) {
        const KeySpec *key = &config_schema[k];
        if (strcmp(key->section, "model") || !cfg->key_origin[k][0])
            continue;
        char *wanted = NULL, *have = NULL;
        size_t size;
        FILE *out = open_memstream(&wanted, &size);
        config_print_value(out, cfg, key);
        fclose(out);
        out = open_memstream(&have, &size);
        config_print_value(out, &merged, key);
        fclose(out);
        bool adjustable = false;
        for (size_t i = 0; i < sizeof adjustable_model_keys / sizeof *adjustable_model_keys; i++)
            adjustable |= !strcmp(key->name, adjustable_model_keys[i]);
        if (strcmp(wanted, have) && !adjustable)
            RP_FATAL("%s: key 'model.%s': expected the checkpoint's value%s (%s) or no setting, got%s; only "
                     "relative_position, relative_k, residual_attention(_mean), max_position, dropouts, "
                     "init_range and seed may change when fine-tuning", cfg->key_origin[k], key->name, have,
                     origin, wanted);
        free(wanted);
        free(have);
        if (adjustable) { /* copy the typed field */
            size_t bytes = key->type == KEY_INT64 ? sizeof(int64_t) : key->type == KEY_FLOAT ? sizeof(float)
                                                                                              : sizeof(int);
            memcpy((char *)&merged + key->offset, (const char *)cfg + key->offset, bytes);
        }
    }
    if (merged.model.max_position < stored->max_position && merged.model.absolute_position)
        RP_FATAL("%s: key 'model.max_position': expected at least the checkpoint's %d (%s): the absolute "
                 "position table can grow when fine-tuning, not shrink, got %d",
                 cfg->key_origin[KEY(model, max_position)], stored->max_position, origin,
                 merged.model.max_position);
    cfg->model = merged.model;
    cfg->data = stored_config->data;
    config_validate(cfg);
}

/* ---- comparing two models ------------------------------------------------------------------- */

/* The key's value as printed in the INI text (" value"); caller frees. */
static char *value_text(const Config *cfg, const KeySpec *key) {
    char *text = NULL;
    size_t size;
    FILE *out = open_memstream(&text, &size);
    RP_CHECK(out, "out of memory formatting the configuration");
    config_print_value(out, cfg, key);
    RP_CHECK(fclose(out) == 0, "out of memory formatting the configuration");
    return text;
}

bool config_model_difference(const Config *a, const Config *b, const char *const *ignore, int num_ignore,
                             ConfigDifference *diff) {
    for (int k = 0; k < config_num_keys; k++) {
        const KeySpec *key = &config_schema[k];
        bool ignored = false;
        for (int i = 0; i < num_ignore; i++)
            ignored |= !strcmp(key->name, ignore[i]);
        if (strcmp(key->section, "model") || ignored)
            continue;
        char *va = value_text(a, key), *vb = value_text(b, key);
        bool differ = strcmp(va, vb) != 0;
        if (differ) {
            snprintf(diff->key, sizeof diff->key, "model.%s", key->name);
            snprintf(diff->a, sizeof diff->a, "%s", va[0] == ' ' ? va + 1 : va);
            snprintf(diff->b, sizeof diff->b, "%s", vb[0] == ' ' ? vb + 1 : vb);
        }
        free(va);
        free(vb);
        if (differ)
            return true;
    }
    return false;
}

/* ---- printing -------------------------------------------------------------------------------- */

char *config_to_ini(const Config *cfg) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    RP_CHECK(out, "out of memory formatting the configuration");
    for (int k = 0; k < config_num_keys; k++) {
        const KeySpec *key = &config_schema[k];
        if (!k || strcmp(key->section, config_schema[k - 1].section))
            fprintf(out, "%s[%s]\n", k ? "\n" : "", key->section);
        char expected[256];
        config_describe_expected(key, expected, sizeof expected);
        fprintf(out, "; %s: %s\n%s =", key->help, expected, key->name);
        config_print_value(out, cfg, key);
        fputc('\n', out);
    }
    RP_CHECK(fclose(out) == 0, "out of memory formatting the configuration");
    return text;
}
