/* A generic typed INI engine. A schema is a table of rows (section, key, type, default, range,
 * help, offset of the field) over a caller's struct of values; this module knows no section or
 * key of its own. Parsing INI text, `--set section.key=value` overrides, defaults, the origin of
 * every key's value, cross-key validation hooks and the printed form all go through the schema.
 * Any error stops the program with
 *     ORIGIN:LINE: key 'section.key': expected ..., got ...
 * (for overrides the origin is "--set section.key=value"). The concrete schema of realpos is
 * train/config/. Whole configurations: config_parse.h; which keys apply: config_use.h. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_PATH_MAX 512    /* bytes of a KEY_STRING field and of each KEY_PATHS entry */
#define CONFIG_MAX_FILES 16    /* entries of a KEY_PATHS field */
#define CONFIG_MAX_KEYS 128    /* rows of a schema */
#define CONFIG_KEY_NAME_MAX 32 /* characters of a key name */
#define CONFIG_ORIGIN_MAX (CONFIG_PATH_MAX + 64)
#define CONFIG_MESSAGE_MAX 1024

/* Field types: KEY_INT int, KEY_INT64 int64_t, KEY_FLOAT float, KEY_BOOL int (0/1), KEY_ENUM an
 * int-sized enum, KEY_STRING char[CONFIG_PATH_MAX], KEY_PATHS char[CONFIG_MAX_FILES][CONFIG_PATH_MAX]
 * with an int count, KEY_WORDS char[CONFIG_PATH_MAX] holding space-separated words (a list longer
 * than an INI line, e.g. a tagging task's labels, continues on indented lines as KEY_PATHS do). */
typedef enum { KEY_INT, KEY_INT64, KEY_FLOAT, KEY_BOOL, KEY_ENUM, KEY_STRING, KEY_PATHS, KEY_WORDS } KeyType;

typedef struct {
    const char *section, *name;
    KeyType type;
    size_t offset;             /* of the field in the values struct */
    size_t count_offset;       /* KEY_PATHS: of the int that counts the entries */
    const char *fallback;      /* default, as INI text */
    int64_t int_min, int_max;  /* KEY_INT, KEY_INT64: inclusive range */
    float float_min, float_max;
    bool min_open, max_open;   /* KEY_FLOAT: bound excluded */
    bool nonempty;             /* KEY_STRING: "" not allowed */
    const char *const *names;  /* KEY_ENUM: value names in enum order, NULL-terminated */
    const char *help;
} KeySpec;

/* Where each key got its value ("file.ini:12", "--set model.k=3", or "" for the default),
 * indexed like the schema's rows, and the job the values were loaded for (a bit of
 * ConfigSchema.job_names; 0: none, e.g. `realpos config`). A member of the values struct. */
typedef struct {
    char of[CONFIG_MAX_KEYS][CONFIG_ORIGIN_MAX];
    unsigned job;
} ConfigOrigins;

/* Which jobs read a key and when it applies: one row per key that is not read by every job, or
 * that matters only for some values of other keys (core/config/config_use.c). `when` is text:
 *     CLAUSE [and CLAUSE ...]   or   CLAUSE [or CLAUSE ...]
 *     CLAUSE:  section.key = v1 | v2   or   section.key != v1 | v2
 * each value read as the other key's type (its schema row) and compared as a value of that type
 * (config_values_equal: -0 = 0), as the code compares it; values only, never where a value came
 * from (a stored config.ini must read back to the same keys applying).
 * E.g. {"model.relative_k", 0, "model.relative_position != none", NULL, NULL}. */
typedef struct {
    const char *key;     /* "section.name" */
    unsigned jobs;       /* bits of ConfigSchema.job_names that read it; 0 = every job */
    const char *when;    /* NULL = always */
    const char *instead; /* NULL, or what the other jobs read instead (e.g. "task.max_steps") */
    const char *others_when; /* NULL, or a condition under which the other jobs read it too (e.g. a
                              * model fine-tuned from scratch reads data.vocab: "task.init_checkpoint = none") */
} KeyUse;

typedef struct {
    const char *const *sections; /* in printed order */
    int num_sections;
    const KeySpec *keys;         /* grouped by section, in the order of `sections` */
    int num_keys;
    size_t values_size;          /* sizeof the values struct */
    size_t origins_offset;       /* of its ConfigOrigins */
    const char *const *job_names; /* bit i of a job mask: job_names[i] ("pretraining"), NULL-terminated */
    const KeyUse *uses;          /* keys not read by every job or not always (see KeyUse) */
    int num_uses;
} ConfigSchema;

/* A cross-key validation hook: fatal (config_reject) on an impossible combination of values. */
typedef void (*ConfigCheck)(const void *values);

/* ---- schema rows: offsetof that fails to compile unless T.sec.key has the field type --------- */
#define CONFIG_FIELD(T, member, type) _Generic(((T *)0)->member, type: offsetof(T, member))
#define CONFIG_INT_KEY(T, sec, key, def, lo, hi, desc)                                             \
    {.section = #sec, .name = #key, .type = KEY_INT, .offset = CONFIG_FIELD(T, sec.key, int),      \
     .fallback = def, .int_min = lo, .int_max = hi, .help = desc}
#define CONFIG_INT64_KEY(T, sec, key, def, lo, hi, desc)                                           \
    {.section = #sec, .name = #key, .type = KEY_INT64,                                             \
     .offset = CONFIG_FIELD(T, sec.key, int64_t), .fallback = def, .int_min = lo, .int_max = hi,  \
     .help = desc}
#define CONFIG_FLOAT_KEY(T, sec, key, def, lo_bracket, lo, hi, hi_bracket, desc)                   \
    {.section = #sec, .name = #key, .type = KEY_FLOAT, .offset = CONFIG_FIELD(T, sec.key, float),  \
     .fallback = def, .float_min = lo, .float_max = hi, .min_open = lo_bracket == '(',             \
     .max_open = hi_bracket == ')', .help = desc}
#define CONFIG_BOOL_KEY(T, sec, key, def, desc)                                                    \
    {.section = #sec, .name = #key, .type = KEY_BOOL, .offset = CONFIG_FIELD(T, sec.key, int),     \
     .fallback = def, .help = desc}
#define CONFIG_ENUM_KEY(T, sec, key, enum_type, value_names, def, desc)                            \
    {.section = #sec, .name = #key, .type = KEY_ENUM,                                              \
     .offset = CONFIG_FIELD(T, sec.key, enum_type), .fallback = def, .names = value_names,        \
     .help = desc}
#define CONFIG_STRING_KEY(T, sec, key, def, required, desc)                                        \
    {.section = #sec, .name = #key, .type = KEY_STRING,                                            \
     .offset = CONFIG_FIELD(T, sec.key, char *), .fallback = def, .nonempty = required,           \
     .help = desc}
#define CONFIG_WORDS_KEY(T, sec, key, def, desc)                                                   \
    {.section = #sec, .name = #key, .type = KEY_WORDS, .offset = CONFIG_FIELD(T, sec.key, char *),  \
     .fallback = def, .help = desc}
#define CONFIG_PATHS_KEY(T, sec, key, count, def, desc)                                            \
    {.section = #sec, .name = #key, .type = KEY_PATHS,                                             \
     .offset = CONFIG_FIELD(T, sec.key, char(*)[CONFIG_PATH_MAX]),                                 \
     .count_offset = CONFIG_FIELD(T, sec.count, int), .fallback = def, .help = desc}

/* ---- single keys ----------------------------------------------------------------------------- */

/* Schema index of section.name, or -1 with "key '...': expected ..., got ..." in `why`. */
int config_find_key(const ConfigSchema *schema, const char *section, const char *name, char *why,
                    size_t why_size);
/* What a key accepts: "an integer in [1, 65536]", "a number >= 0", "one of post, pre", ... */
void config_describe_expected(const KeySpec *key, char *out, size_t size);
/* Parses `text` into the key's field of `values`; on failure writes "key '...': expected ...,
 * got ..." to `why` and returns false. With `append`, path-list entries are added instead of
 * replacing. */
bool config_set_value(void *values, const KeySpec *key, const char *text, bool append, char *why,
                      size_t why_size);
/* The key's value as config_set_value reads it back: " value" (nothing for an empty string);
 * long path lists continue on indented lines. */
void config_print_value(FILE *out, const void *values, const KeySpec *key);
/* Whether key's field holds the same value in a and b, compared as its type (numbers as numbers:
 * -0 = 0), as the code reads it: applicability, defaults and differences all compare so. */
bool config_values_equal(const KeySpec *key, const void *a, const void *b);
/* The same as a string (caller frees). */
char *config_value_text(const void *values, const KeySpec *key);

/* Any byte string as one word of a KEY_WORDS list: '%', ';', '#', '=', ':' and the bytes 0x00-0x20
 * and 0x7f written as %XX (two upper-case hex digits; what INI text and word lists cannot hold:
 * comments, key separators, whitespace). Writes at most size - 1 bytes and a NUL into out; returns
 * the encoded length (>= size: truncated). config_word_decode reverses it: %XX with two hex digits
 * is the byte XX (but %00), every other byte (a '%' not followed by two hex digits too) stands for itself;
 * out (size >= length + 1) gets at most length bytes and a NUL. */
size_t config_word_encode(char *out, size_t size, const char *word);
void config_word_decode(char *out, const char *word, size_t length);
