/* Which keys of a schema (config_schema.h) apply: read by the job the values were loaded for and
 * their KeyUse condition true; warnings and refusals for keys given that do not. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "core/config/config_schema.h"

/* Whether key k matters: read by the job the values were loaded for (any job when none) and its
 * condition true. false with the reason in `why` ("fine-tuning does not read it (task.max_steps
 * does)", "it needs model.relative_position != none; model.relative_position is none (default)"),
 * and *unused_by_job set when the job is the reason. Cross-key checks skip keys that do not apply. */
bool config_key_applies(const ConfigSchema *schema, const void *values, int k, bool *unused_by_job,
                        char *why, size_t why_size);
/* Every key the file or --set gives that does not apply: fatal for a --set (the command would
 * run as if it were not given), a warning for a file's unless it holds the default (a file may
 * serve several jobs and settings; a run's config.ini lists every key). Returns the warnings. */
int config_report_unused(const ConfigSchema *schema, const void *values);
/* Fatal ("internal") unless every KeyUse row names a key and its condition parses. */
void config_check_uses(const ConfigSchema *schema);
/* The comment line `realpos config` prints above key k ("" if none): the jobs that read it and,
 * when its condition is false, that it does not apply. */
void config_use_comment(const ConfigSchema *schema, const void *values, int k, char *out, size_t size);
