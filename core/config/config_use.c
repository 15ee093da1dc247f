/* Which keys apply (config_schema.h: KeyUse): the job that reads a key, the condition on other
 * keys under which it matters, and the reports built on them (keys a command would ignore, the
 * `realpos config` comments). Conditions are parsed from their text at each use: a table of a
 * hundred rows costs microseconds, and the text is also what the messages quote. */
#include "core/config/config_use.h"

#include <ctype.h>
#include <string.h>

#include "core/common.h"

#define CLAUSE_MAX 160
#define CONFIG_WHEN_MAX 100 /* characters of a condition: its `realpos config` comment fits an INI line */

static const ConfigOrigins *origins_of(const ConfigSchema *schema, const void *values) {
    return (const ConfigOrigins *)((const char *)values + schema->origins_offset);
}

static const KeyUse *use_of(const ConfigSchema *schema, int k) {
    const KeySpec *key = &schema->keys[k];
    size_t section = strlen(key->section);
    for (int u = 0; u < schema->num_uses; u++) {
        const char *name = schema->uses[u].key;
        if (!strncmp(name, key->section, section) && name[section] == '.' && !strcmp(name + section + 1, key->name))
            return &schema->uses[u];
    }
    return NULL;
}

/* Schema index of "section.name" (length bytes of text), or -1. */
static int key_named(const ConfigSchema *schema, const char *text, size_t length) {
    for (int k = 0; k < schema->num_keys; k++) {
        const KeySpec *key = &schema->keys[k];
        size_t section = strlen(key->section);
        if (length == section + 1 + strlen(key->name) && !strncmp(text, key->section, section) &&
            text[section] == '.' && !strncmp(text + section + 1, key->name, length - section - 1))
            return k;
    }
    return -1;
}

/* Whether key k's value in `values` is one of the list "a | b | c", each read as the key's type
 * (config_set_value: the same parser and table as the value itself) and compared as that type
 * (config_values_equal: "-0" is 0). values NULL: only check that every entry parses. false in
 * *parsed if one does not. */
static bool among(const ConfigSchema *schema, int k, const char *list, const void *values, bool *parsed) {
    const KeySpec *key = &schema->keys[k];
    void *entry_values = xcalloc(1, schema->values_size);
    bool found = false;
    *parsed = true;
    for (const char *s = list; *s && *parsed;) {
        s += strspn(s, " |");
        size_t n = strcspn(s, "|");
        while (n && s[n - 1] == ' ')
            n--;
        char entry[CLAUSE_MAX], why[CONFIG_MESSAGE_MAX];
        if (n) {
            *parsed = n < sizeof entry;
            snprintf(entry, sizeof entry, "%.*s", (int)n, s);
            *parsed = *parsed && config_set_value(entry_values, key, entry, false, why, sizeof why);
            found |= *parsed && values && config_values_equal(key, entry_values, values);
        }
        s += strcspn(s, "|");
    }
    free(entry_values);
    return found;
}

/* One clause "section.key = v1 | v2" or "section.key != v1 | v2": its truth in *holds, the key in
 * *k; false if it does not parse (nor does a listed value the key cannot hold). values NULL: parse
 * only (*holds = true). A condition reads values only, never origins: config.ini and a
 * checkpoint's config, which set every key, must read back to the same keys applying. */
static bool eval_clause(const ConfigSchema *schema, const void *values, const char *clause, bool *holds, int *k) {
    size_t name = strcspn(clause, " !=");
    *k = key_named(schema, clause, name);
    const char *op = clause + name + strspn(clause + name, " ");
    if (*k < 0)
        return false;
    bool negated = op[0] == '!';
    if (strncmp(op + negated, "=", 1) || !op[1 + negated + strspn(op + 1 + negated, " |")])
        return false;
    bool parsed;
    *holds = among(schema, *k, op + 1 + negated, values, &parsed) != negated;
    if (!values)
        *holds = true;
    return parsed;
}

/* The condition's truth; false if it does not parse. On a false condition, `why` names the first
 * clause that fails (the and-form) or the first clause (the or-form) and that key's value. */
static bool eval_condition(const ConfigSchema *schema, const void *values, const char *when, bool *holds, char *why,
                           size_t why_size) {
    bool any_or = strstr(when, " or ") != NULL, any_and = strstr(when, " and ") != NULL;
    if (any_or && any_and)
        return false;
    const char *joint = any_or ? " or " : " and ";
    *holds = !any_or;
    int blame = -1;
    for (const char *s = when; *s;) {
        const char *next = strstr(s, joint);
        size_t length = next ? (size_t)(next - s) : strlen(s);
        char clause[CLAUSE_MAX];
        if (length >= sizeof clause)
            return false;
        memcpy(clause, s, length);
        clause[length] = '\0';
        bool clause_holds;
        int k;
        if (!eval_clause(schema, values, clause, &clause_holds, &k))
            return false;
        if (blame < 0 && (any_or || !clause_holds))
            blame = k;
        *holds = any_or ? *holds || clause_holds : *holds && clause_holds;
        s = next ? next + strlen(joint) : s + length;
    }
    if (!*holds && why && values) {
        const KeySpec *key = &schema->keys[blame];
        const char *origin = origins_of(schema, values)->of[blame];
        char *text = config_value_text(values, key);
        snprintf(why, why_size, "it needs %s; %s.%s is%s (%s)", when, key->section, key->name,
                 text[0] ? text : " empty", origin[0] ? origin : "default");
        free(text);
    }
    return true;
}

/* "pretraining" or "pretraining and fine-tuning": the jobs of a mask. */
static void job_list(const ConfigSchema *schema, unsigned jobs, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int j = 0, n = 0; schema->job_names && schema->job_names[j]; j++)
        if (jobs & (1u << j))
            used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s%s", n++ ? " and " : "",
                                     schema->job_names[j]);
}

bool config_key_applies(const ConfigSchema *schema, const void *values, int k, bool *unused_by_job, char *why,
                        size_t why_size) {
    const KeyUse *use = use_of(schema, k);
    unsigned job = origins_of(schema, values)->job;
    if (unused_by_job)
        *unused_by_job = false;
    if (!use)
        return true;
    bool others_read = false;
    if (use->jobs && job && !(use->jobs & job) && use->others_when)
        RP_CHECK(eval_condition(schema, values, use->others_when, &others_read, NULL, 0),
                 "internal: key %s: condition '%s' does not parse", use->key, use->others_when);
    if (use->jobs && job && !(use->jobs & job) && !others_read) {
        char reader[128], other[128];
        job_list(schema, job, reader, sizeof reader);
        job_list(schema, use->jobs, other, sizeof other);
        if (use->others_when)
            snprintf(why, why_size, "%s reads it only when %s (%s always)", reader, use->others_when, other);
        else if (use->instead)
            snprintf(why, why_size, "%s does not read it (%s only; %s does the job)", reader, other, use->instead);
        else
            snprintf(why, why_size, "%s does not read it (%s only)", reader, other);
        if (unused_by_job)
            *unused_by_job = true;
        return false;
    }
    bool holds = true;
    if (use->when)
        RP_CHECK(eval_condition(schema, values, use->when, &holds, why, why_size),
                 "internal: key %s: condition '%s' does not parse", use->key, use->when);
    return holds;
}

/* Whether key k holds its default value (e.g. every key of a config.ini that a run wrote out). */
static bool at_default(const ConfigSchema *schema, const void *values, int k) {
    const KeySpec *key = &schema->keys[k];
    void *defaults = xcalloc(1, schema->values_size);
    char why[CONFIG_MESSAGE_MAX];
    RP_CHECK(config_set_value(defaults, key, key->fallback, false, why, sizeof why), "schema default: %s", why);
    bool same = config_values_equal(key, values, defaults);
    free(defaults);
    return same;
}

int config_report_unused(const ConfigSchema *schema, const void *values) {
    int warnings = 0;
    char why[CONFIG_MESSAGE_MAX];
    for (int k = 0; k < schema->num_keys; k++) {
        const char *origin = origins_of(schema, values)->of[k];
        bool unused_by_job, from_set = !strncmp(origin, "--set", 5);
        if (!origin[0] || config_key_applies(schema, values, k, &unused_by_job, why, sizeof why))
            continue;
        if (!from_set && at_default(schema, values, k))
            continue; /* a file's key at its default changes nothing, whichever job reads it */
        const KeySpec *key = &schema->keys[k];
        const char *instead = unused_by_job ? use_of(schema, k)->instead : NULL;
        RP_CHECK(!from_set, "%s: key '%s.%s' would have no effect: %s; remove it%s%s", origin,
                 key->section, key->name, why, instead ? " or set " : "", instead ? instead : "");
        rp_log("warning: %s: key '%s.%s' has no effect: %s", origin, key->section, key->name, why);
        warnings++;
    }
    return warnings;
}

void config_check_uses(const ConfigSchema *schema) {
    for (int u = 0; u < schema->num_uses; u++) {
        const KeyUse *use = &schema->uses[u];
        int k = key_named(schema, use->key, strlen(use->key));
        RP_CHECK(k >= 0 && use_of(schema, k) == use, "internal: KeyUse row '%s': no such key, or a second row",
                 use->key);
        RP_CHECK(!use->instead || key_named(schema, use->instead, strlen(use->instead)) >= 0,
                 "internal: KeyUse row '%s': 'instead' names no key: '%s'", use->key, use->instead);
        bool holds;
        RP_CHECK(!use->when || strlen(use->when) <= CONFIG_WHEN_MAX, "internal: KeyUse row '%s': a condition of "
                 "more than %d characters", use->key, CONFIG_WHEN_MAX);
        RP_CHECK(!use->when || eval_condition(schema, NULL, use->when, &holds, NULL, 0),
                 "internal: KeyUse row '%s': condition '%s' does not parse", use->key, use->when);
        RP_CHECK(!use->others_when || (use->jobs && strlen(use->others_when) <= CONFIG_WHEN_MAX &&
                                       eval_condition(schema, NULL, use->others_when, &holds, NULL, 0)),
                 "internal: KeyUse row '%s': others_when '%s' does not parse, is too long or has no jobs", use->key,
                 use->others_when);
    }
}

void config_use_comment(const ConfigSchema *schema, const void *values, int k, char *out, size_t size) {
    const KeyUse *use = use_of(schema, k);
    out[0] = '\0';
    if (!use)
        return;
    size_t used = 0;
    if (use->jobs) {
        char jobs[128], others[128];
        job_list(schema, use->jobs, jobs, sizeof jobs);
        job_list(schema, ~use->jobs, others, sizeof others);
        if (use->others_when && others[0])
            used += (size_t)snprintf(out, size, "; %s, and %s when %s", jobs, others, use->others_when);
        else
            used += (size_t)snprintf(out, size, "; %s only", jobs);
        if (use->instead && others[0] && !use->others_when)
            used += (size_t)snprintf(out + used, used < size ? size - used : 0, " (%s reads %s)", others,
                                     use->instead);
    }
    bool holds = true;
    /* no value or origin here: the line must stay within an INI line (config_check_uses caps `when`) */
    if (use->when && eval_condition(schema, values, use->when, &holds, NULL, 0) && !holds && used < size)
        snprintf(out + used, size - used, "%sdoes not apply: it needs %s", used ? "; " : "; ", use->when);
}
