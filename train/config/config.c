/* Config: loading through the schema (schema.c) and the cross-key checks that single keys
 * cannot express, each naming the origin of the offending key. */
#include "train/config/config.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "core/common.h"
#include "core/config/config_parse.h"
#include "core/config/config_use.h"
#include "core/gemm.h"
#include "layers/positions.h"

#define KEY(sec, name) config_key_index(&config_schema, #sec, #name)

/* Where key k got its value: "file.ini:12", "--set ..." or "default". */
static const char *origin_of(const Config *cfg, int k) {
    const char *origin = config_key_origin(&config_schema, cfg, k);
    return origin[0] ? origin : "default";
}

#define reject(cfg, k, ...) config_reject(&config_schema, cfg, k, __VA_ARGS__)

/* Whether key k matters for the job cfg was loaded for (config_key_applies): a cross-key check
 * between two keys runs only where both apply. */
static bool applies(const Config *cfg, int k) {
    char why[CONFIG_MESSAGE_MAX];
    return config_key_applies(&config_schema, cfg, k, NULL, why, sizeof why);
}

int config_key_is_set(const Config *cfg, const char *section, const char *name) {
    return config_key_origin(&config_schema, cfg, config_key_index(&config_schema, section, name))[0] != '\0';
}

static void validate_task(const Config *cfg) {
    const TaskConfig *k = &cfg->task;
    if (!applies(cfg, KEY(task, type)))
        return; /* pretraining reads no [task] key */
    if (k->group_by_length && k->padding == PAD_MAX_LENGTH)
        reject(cfg, KEY(task, group_by_length),
               "expected no with task.padding = max_length (%s): every batch is then max_seq_len long, got yes",
               origin_of(cfg, KEY(task, padding)));
    if (k->glue_task != GLUE_NONE && config_key_is_set(cfg, "task", "type")) {
        TaskKind implied = k->glue_task == GLUE_STSB ? TASK_REGRESSION : TASK_CLASSIFICATION;
        if (k->type != implied)
            reject(cfg, KEY(task, type), "expected %s (or no setting) for task.glue_task = %s (%s), got %s",
                   task_kind_name(implied), glue_task_name(k->glue_task), origin_of(cfg, KEY(task, glue_task)),
                   task_kind_name(k->type));
    }
    if (k->type == TASK_TAGGING && k->stop_accuracy > 0) { /* the stop reads the dev scores during training */
        if (!k->dev_file[0])
            reject(cfg, KEY(task, stop_accuracy), "expected a task.dev_file to stop on (its scores during training), "
                   "got none; set task.dev_file or task.stop_accuracy = 0");
        if (k->eval_every <= 0)
            reject(cfg, KEY(task, stop_accuracy), "expected dev evaluations during training to stop on, but "
                   "task.eval_every = 0 (%s) scores the dev file only at the end; set task.eval_every",
                   origin_of(cfg, KEY(task, eval_every)));
    }
    if (k->type == TASK_SQUAD) {
        if (k->max_query_length + 4 > k->max_seq_len)
            reject(cfg, KEY(task, max_query_length),
                   "expected at most task.max_seq_len - 4 = %d (%s) so that a window holds context, got %d",
                   k->max_seq_len - 4, origin_of(cfg, KEY(task, max_seq_len)), k->max_query_length);
        return;
    }
    if (k->glue_task != GLUE_NONE || !applies(cfg, KEY(task, text_a_column)))
        return;
    if (k->text_b_column == k->text_a_column)
        reject(cfg, KEY(task, text_b_column), "expected a column other than task.text_a_column = %d (%s), got %d",
               k->text_a_column, origin_of(cfg, KEY(task, text_a_column)), k->text_b_column);
    /* -1 is "absent" for both text_b_column and label_column: an unlabelled single-text file */
    if (k->label_column >= 0 && (k->label_column == k->text_a_column || k->label_column == k->text_b_column))
        reject(cfg, KEY(task, label_column), "expected a column other than the text columns (task.text_a_column = "
               "%d, task.text_b_column = %d), got %d", k->text_a_column, k->text_b_column, k->label_column);
    int highest = k->text_a_column > k->text_b_column ? k->text_a_column : k->text_b_column;
    highest = highest > k->label_column ? highest : k->label_column;
    if (k->num_columns && k->num_columns <= highest)
        reject(cfg, KEY(task, num_columns), "expected more than %d (the highest column used), got %d", highest,
               k->num_columns);
    if (k->type == TASK_CLASSIFICATION && applies(cfg, KEY(task, labels))) {
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

static void validate_model(const Config *cfg);
static void validate_data(const Config *cfg);

/* bf16 needs the CPU's bf16 instructions: refused here, when the config is read, before anything
 * is allocated. A checkpoint's stored config is not checked (config_load_string): its precision
 * is a record, and the reading command's own setting applies. */
static void validate_precision(const Config *cfg) {
    if (cfg->train.precision != PRECISION_BF16)
        return;
    CpuBf16 cpu;
    if (!gemm_bf16_runs_here(&cpu))
        reject(cfg, KEY(train, precision), "bf16 needs a CPU with avx512_bf16 or amx_bf16; this one (%s) has "
               "neither: set train.precision = fp32", cpu.cpu);
}

static unsigned origins_job(const Config *cfg) { return cfg->origins.job; }

/* train.warmup_proportion > 0 gives pretraining's warm-up (train.warmup_steps does not apply). */
static bool warmup_by_proportion(const Config *cfg) { return cfg->train.warmup_proportion > 0; }

void config_validate(const Config *cfg) {
    validate_precision(cfg);
    validate_model(cfg);
    validate_data(cfg);
    const TrainConfig *t = &cfg->train;
    if (applies(cfg, KEY(train, warmup_steps)) && !warmup_by_proportion(cfg) && t->warmup_steps > t->max_steps)
        reject(cfg, KEY(train, warmup_steps), "expected at most train.max_steps = %d (%s), got %d; for a warm-up "
               "that follows the run's length, set train.warmup_proportion (e.g. 0.1) instead",
               t->max_steps, origin_of(cfg, KEY(train, max_steps)), t->warmup_steps);
    validate_task(cfg);
}

int config_warmup_steps(const Config *cfg) {
    const TrainConfig *t = &cfg->train;
    return warmup_by_proportion(cfg) ? (int)lround((double)t->warmup_proportion * t->max_steps) : t->warmup_steps;
}

/* "warning: ... the warm-up covers ..." when it is more than half of the run: the learning rate
 * then peaks late (or never, at the whole run) and the decay is short. */
static void report_warmup(const Config *cfg) {
    bool finetuning = origins_job(cfg) == JOB_FINETUNE;
    int k = finetuning ? KEY(task, warmup_proportion)
                       : warmup_by_proportion(cfg) ? KEY(train, warmup_proportion) : KEY(train, warmup_steps);
    double share = finetuning ? cfg->task.warmup_proportion
                              : (double)config_warmup_steps(cfg) / cfg->train.max_steps;
    const KeySpec *key = &config_schema.keys[k];
    char *value = config_value_text(cfg, key);
    if (share >= 1)
        rp_log("warning: the warm-up (%s.%s =%s, %s) covers the whole run: the learning rate never reaches its "
               "peak and never decays", key->section, key->name, value, origin_of(cfg, k));
    else if (share > 0.5)
        rp_log("warning: the warm-up (%s.%s =%s, %s) covers %.0f%% of the run: the learning rate peaks only then and "
               "decays over the rest", key->section, key->name, value, origin_of(cfg, k), 100 * share);
    free(value);
}

void config_report_job(const Config *cfg) {
    config_report_unused(&config_schema, cfg);
    if (origins_job(cfg) != JOB_NONE)
        report_warmup(cfg);
}

static void validate_model(const Config *cfg) {
    const ModelConfig *m = &cfg->model;
    if (m->hidden_size % m->num_heads)
        reject(cfg, KEY(model, num_heads),
               "expected a divisor of model.hidden_size = %d (%s), got %d", m->hidden_size,
               origin_of(cfg, KEY(model, hidden_size)), m->num_heads);
    /* keys that do not apply to the chosen scheme are skipped (warned about by config_report_unused):
     * a base config may serve several schemes */
    if (applies(cfg, KEY(model, t5_num_buckets)) && m->t5_num_buckets % 2)
        reject(cfg, KEY(model, t5_num_buckets), "expected an even number (half the buckets per direction), got %d",
               m->t5_num_buckets);
    if (applies(cfg, KEY(model, t5_max_distance)) && applies(cfg, KEY(model, t5_num_buckets)) &&
        m->t5_max_distance <= m->t5_num_buckets / 4)
        reject(cfg, KEY(model, t5_max_distance), "expected more than model.t5_num_buckets / 4 = %d (%s), the "
               "distances with a bucket each, got %d", m->t5_num_buckets / 4,
               origin_of(cfg, KEY(model, t5_num_buckets)), m->t5_max_distance);
    const char *even_width = pos_scheme(m->relative_position)->even_head_width;
    if (even_width && (m->hidden_size / m->num_heads) % 2)
        reject(cfg, KEY(model, num_heads), "expected an even head width hidden_size / num_heads for "
               "relative_position = %s (%s), %s, got %d / %d = %d", rel_kind_name(m->relative_position),
               origin_of(cfg, KEY(model, relative_position)), even_width, m->hidden_size, m->num_heads,
               m->hidden_size / m->num_heads);
    /* residual_attention_mean without residual_attention does not apply (schema.c's key_uses): warned
     * about in a file, refused with --set (config_report_unused), and the model reads it only with
     * residual attention */
}

static void validate_data(const Config *cfg) {
    const ModelConfig *m = &cfg->model;
    const DataConfig *d = &cfg->data;
    if (!applies(cfg, KEY(data, max_seq_len)))
        return; /* fine-tuning: the checkpoint's [data], task.max_seq_len */
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
    "relative_position", "relative_k", "t5_num_buckets", "t5_max_distance", "rope_theta",
    "residual_attention", "residual_attention_mean", "max_position",
    "hidden_dropout", "attention_dropout", "init_range", "seed"};

void config_adopt_model(Config *cfg, const Config *stored_config, const char *origin) {
    const ModelConfig *stored = &stored_config->model;
    Config merged = *cfg;
    merged.model = *stored;
    for (int k = 0; k < config_schema.num_keys; k++) {
        const KeySpec *key = &config_schema.keys[k];
        const char *set_by = config_key_origin(&config_schema, cfg, k);
        if (strcmp(key->section, "model") || !set_by[0])
            continue;
        char *wanted = config_value_text(cfg, key), *have = config_value_text(&merged, key);
        bool adjustable = false;
        for (size_t i = 0; i < sizeof adjustable_model_keys / sizeof *adjustable_model_keys; i++)
            adjustable |= !strcmp(key->name, adjustable_model_keys[i]);
        if (!config_values_equal(key, cfg, &merged) && !adjustable)
            RP_FATAL("%s: key 'model.%s': expected the checkpoint's value%s (%s) or no setting, got%s; only "
                     "relative_position, relative_k, t5_*, rope_theta, residual_attention(_mean), max_position, dropouts, "
                     "init_range and seed may change when fine-tuning", set_by, key->name, have,
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
                 config_key_origin(&config_schema, cfg, KEY(model, max_position)), stored->max_position, origin,
                 merged.model.max_position);
    cfg->model = merged.model;
    cfg->data = stored_config->data;
    config_validate(cfg);
}


/* ---- settings a command takes from a checkpoint instead ----------------------------------------- */

/* Warn that key k of cfg, set explicitly, differs from stored's; returns 1 if it did. */
static int report_difference(const Config *cfg, const Config *stored, int k, const char *stored_origin,
                             const char *consequence) {
    const KeySpec *key = &config_schema.keys[k];
    const char *set_by = config_key_origin(&config_schema, cfg, k);
    char *mine = config_value_text(cfg, key), *theirs = config_value_text(stored, key);
    int differ = set_by[0] && !config_values_equal(key, cfg, stored);
    if (differ)
        rp_log("warning: %s: key '%s.%s' =%s differs from the checkpoint's%s (%s); %s", set_by, key->section,
               key->name, mine, theirs, stored_origin, consequence);
    free(mine);
    free(theirs);
    return differ;
}

int config_report_differences(const Config *cfg, const Config *stored, const char *section, const char *stored_origin,
                              const char *consequence) {
    int count = 0;
    for (int k = 0; k < config_schema.num_keys; k++)
        if (!strcmp(config_schema.keys[k].section, section))
            count += report_difference(cfg, stored, k, stored_origin, consequence);
    return count;
}

int config_each_difference(const Config *a, const Config *b,
                           void (*visit)(const KeySpec *key, const char *a_text, const char *b_text, void *ctx),
                           void *ctx) {
    int count = 0;
    for (int k = 0; k < config_schema.num_keys; k++) {
        const KeySpec *key = &config_schema.keys[k];
        char *text_a = config_value_text(a, key), *text_b = config_value_text(b, key);
        if (!config_values_equal(key, a, b)) {
            visit(key, text_a + (text_a[0] == ' '), text_b + (text_b[0] == ' '), ctx);
            count++;
        }
        free(text_a);
        free(text_b);
    }
    return count;
}

void config_adopt_keys(Config *cfg, const Config *stored, const char *section, const char *const *names,
                       int num_names, const char *stored_origin, const char *consequence) {
    for (int i = 0; i < num_names; i++) {
        int k = config_key_index(&config_schema, section, names[i]);
        RP_CHECK(k >= 0, "internal: no key %s.%s", section, names[i]);
        if (!strncmp(config_key_origin(&config_schema, cfg, k), "--set", 5))
            continue; /* the command line wins */
        report_difference(cfg, stored, k, stored_origin, consequence);
        char *text = config_value_text(stored, &config_schema.keys[k]), why[512];
        RP_CHECK(config_set_value(cfg, &config_schema.keys[k], text[0] == ' ' ? text + 1 : text, false, why,
                                  sizeof why), "%s: %s", stored_origin, why);
        free(text);
    }
}

/* ---- comparing two models -------------------------------------------------------------------- */

bool config_model_difference(const Config *a, const Config *b, const char *const *ignore, int num_ignore,
                             ConfigDifference *diff) {
    for (int k = 0; k < config_schema.num_keys; k++) {
        const KeySpec *key = &config_schema.keys[k];
        bool ignored = false;
        for (int i = 0; i < num_ignore; i++)
            ignored |= !strcmp(key->name, ignore[i]);
        if (strcmp(key->section, "model") || ignored)
            continue;
        char *va = config_value_text(a, key), *vb = config_value_text(b, key);
        bool differ = !config_values_equal(key, a, b);
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

/* ---- loading --------------------------------------------------------------------------------- */

static void check_all(const void *values) { config_validate(values); }
static void check_task(const void *values) {
    validate_precision(values);
    validate_task(values);
}
static void check_model(const void *values) { validate_model(values); }

void config_defaults(Config *cfg) { config_schema_defaults(&config_schema, cfg); }

void config_load(Config *cfg, unsigned job, const char *path, int num_overrides, char *const *overrides) {
    config_schema_load_file(&config_schema, cfg, path, num_overrides, overrides, job, check_all);
}

void config_load_task(Config *cfg, const char *path, int num_overrides, char *const *overrides) {
    config_schema_load_file(&config_schema, cfg, path, num_overrides, overrides, JOB_FINETUNE, check_task);
}

void config_load_model(Config *cfg, const char *path, int num_overrides, char *const *overrides) {
    config_schema_load_file(&config_schema, cfg, path, num_overrides, overrides, JOB_NONE, check_model);
}

void config_load_text(Config *cfg, unsigned job, const char *text, const char *origin, int num_overrides,
                      char *const *overrides) {
    config_schema_load_text(&config_schema, cfg, text, origin, NULL);
    cfg->origins.job = job;
    for (int i = 0; i < num_overrides; i++)
        config_schema_override(&config_schema, cfg, overrides[i]);
    (job == JOB_FINETUNE ? check_task : check_all)(cfg);
}

void config_load_string(Config *cfg, const char *text, const char *origin) {
    /* A checkpoint's config: every key range-checked; the cross-key checks of [model] only, as
     * commands take [data] and [task] from their own config (fine-tuning validates what it adopts). */
    config_schema_load_text(&config_schema, cfg, text, origin, check_model);
}

char *config_to_ini(const Config *cfg) { return config_schema_to_ini(&config_schema, cfg); }
