/* Internal to train/model/hf*.c: config.json <-> realpos Config (mapping table in
 * docs/huggingface.md). */
#pragma once
#include "train/config/config.h"
#include "train/model/model.h"

#define HF_MAX_LABELS 256    /* TAG_MAX_LABELS: what task.tag_labels holds (token classification) */
#define HF_MAX_SEQ_LABELS 32 /* GLUE_MAX_LABELS: what task.labels holds (sequence classification) */
#define HF_LABEL_MAX 64

typedef struct {
    ModelConfig model; /* relative_k = realpos_relative_k, or max_position - 1 */
    int explicit_k;    /* config.json has realpos_relative_k */
    int num_labels;    /* id2label entries (0 when absent) */
    char labels[HF_MAX_LABELS][HF_LABEL_MAX];
    int regression;    /* problem_type = regression */
    int untied;        /* tie_word_embeddings = false */
} HfConfig;

/* Parse config.json (path names it in errors); fatal on a missing, mistyped or unsupported key. */
void hf_config_read(const char *path, HfConfig *out);
/* config.json text for a model with these heads (caller frees). label_names: heads.num_labels
 * names or NULL (LABEL_i). */
char *hf_config_write(const Config *cfg, ModelHeads heads, const char *const *label_names);
