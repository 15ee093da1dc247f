/* The configuration schema: one entry per section.key with its type, default, range and help
 * text. Internal to core/config*.c; everything else uses config.h. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/config.h"

#define CONFIG_MESSAGE_MAX 1024

typedef enum { KEY_INT, KEY_INT64, KEY_FLOAT, KEY_BOOL, KEY_ENUM, KEY_STRING, KEY_PATHS } KeyType;

typedef struct {
    const char *section, *name;
    KeyType type;
    size_t offset;             /* of the field in Config */
    size_t count_offset;       /* KEY_PATHS: of the int that counts the entries */
    const char *fallback;      /* default, as INI text */
    int64_t int_min, int_max;  /* KEY_INT, KEY_INT64: inclusive range */
    float float_min, float_max;
    bool min_open, max_open;   /* KEY_FLOAT: bound excluded */
    bool nonempty;             /* KEY_STRING: "" not allowed */
    const char *const *names;  /* KEY_ENUM: value names in enum order, NULL-terminated */
    const char *help;
} KeySpec;

/* Every key, grouped by section in the order [model] [optim] [train] [data] [task]. */
extern const KeySpec config_schema[];
extern const int config_num_keys;

/* Schema index of section.name, or -1 with "key '...': expected ..., got ..." in `why`. */
int config_find_key(const char *section, const char *name, char *why, size_t why_size);
/* What a key accepts: "an integer in [1, 65536]", "a number >= 0", "one of post, pre", ... */
void config_describe_expected(const KeySpec *key, char *out, size_t size);
/* Parses `text` into the key's field of cfg; on failure writes "key '...': expected ..., got ..."
 * to `why` and returns false. With `append`, path-list entries are added instead of replacing. */
bool config_set_value(Config *cfg, const KeySpec *key, const char *text, bool append, char *why,
                      size_t why_size);
/* The key's value as config_set_value reads it back: " value" (nothing for an empty string);
 * long path lists continue on indented lines. */
void config_print_value(FILE *out, const Config *cfg, const KeySpec *key);
