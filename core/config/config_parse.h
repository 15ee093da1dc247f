/* Whole configurations on a schema (config_schema.h): defaults, INI text and files, `--set`
 * overrides, the origin of every key's value, rejection naming it, and the printed form. */
#pragma once

#include "core/config/config_schema.h"

/* Zero the struct and fill every key with its default. */
void config_schema_defaults(const ConfigSchema *schema, void *values);
/* Defaults, then INI text (e.g. the config stored in a checkpoint; `origin` names it in errors),
 * then `check` (may be NULL). */
void config_schema_load_text(const ConfigSchema *schema, void *values, const char *text,
                             const char *origin, ConfigCheck check);
/* Defaults, then the file, then each "section.key=value" override, then `check` (may be NULL),
 * for `job` (a bit of schema->job_names, or 0 for none; see config_key_applies). */
void config_schema_load_file(const ConfigSchema *schema, void *values, const char *path,
                             int num_overrides, char *const *overrides, unsigned job, ConfigCheck check);
/* Apply one "section.key=value" override; fatal on error. Validate afterwards. */
void config_schema_override(const ConfigSchema *schema, void *values, const char *assignment);
/* The full configuration as INI text (every key, every section, with help comments; a key of a
 * KeyUse row gets a comment naming the jobs that read it, and "does not apply" when its condition
 * is false); caller frees. */
char *config_schema_to_ini(const ConfigSchema *schema, const void *values);

/* ---- origins and rejection ------------------------------------------------------------------ */

/* Schema index of a key the caller knows exists; fatal ("internal") otherwise. */
int config_key_index(const ConfigSchema *schema, const char *section, const char *name);
/* "file.ini:12", "--set ..." or "" (the default) for key k. */
const char *config_key_origin(const ConfigSchema *schema, const void *values, int k);
/* Fatal: "ORIGIN: key 'section.name': <message>" for key k, whose value is impossible
 * (ORIGIN is "(default)" for a default). */
void config_reject(const ConfigSchema *schema, const void *values, int k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
