/* The one JSON reader of realpos (config.json, tokenizer_config.json, safetensors headers and
 * indexes, SQuAD files): cJSON, made strict where JSON readers disagree.
 *   - exactly one value: anything but whitespace after it is an error (cJSON alone stops at the
 *     end of the value and ignores the rest, so `{...}garbage` or two documents pasted together
 *     would be read as the first);
 *   - no object with a repeated key: RFC 8259 leaves the meaning open, Python's json (hence
 *     HuggingFace) keeps the last value, cJSON the first; refusing is the only reading that
 *     agrees with both.
 * Errors are fatal and name the file, what it is, the line and column, and the key. Checking the
 * keys costs O(n log n) in the object's size (a sort), not O(n^2). */
#pragma once
#include <cJSON.h>
#include <stddef.h>

/* Parse len bytes of text (need not be NUL-terminated); caller cJSON_Deletes. */
cJSON *json_parse_strict(const char *text, size_t len, const char *path, const char *what);
/* read_file (regular file checked first) + json_parse_strict. */
cJSON *json_read_file(const char *path, const char *what);
