/* HuggingFace BERT folders <-> realpos models (docs/huggingface.md).
 *
 * A folder holds config.json, model.safetensors (or model.safetensors.index.json + shards),
 * vocab.txt and optionally tokenizer_config.json. Tensor names are realpos's with '/' -> '.'
 * (realpos names its parameters after BertForMaskedLM's state_dict), with or without the "bert."
 * prefix, TF-era "LayerNorm.gamma/beta" accepted. Relative tables: HF's distance_embedding is
 * [2P-1, d] indexed by i - j + P - 1 (P = max_position_embeddings), realpos's [2k+1, d] by
 * clip(i - j, -k, k) + k: the two are the same table for k = P - 1; a realpos table with k < P - 1
 * exports as HF's with the rows beyond +-k repeating the edge rows (the clip), and config.json
 * records "realpos_relative_k" so that import recovers k exactly. */
#pragma once
#include <stddef.h>
#include <stdio.h>

#include "core/io/paths.h"
#include "train/config/config.h"
#include "train/model/model.h"

typedef struct {
    Config cfg;       /* [model], [data] do_lower_case, [task] type/labels for task heads */
    ModelHeads heads; /* from the tensors present */
} HfImport;

/* Read DIR's config.json and weights into a freshly created model m (and out). Prints the table
 * of loaded / dropped tensors to `table`. Fatal, naming the file and key or tensor, on anything
 * realpos cannot represent exactly. Vocabulary and casing are the caller's (hf_read_lower_case). */
void hf_import(const char *dir, HfImport *out, Model *m, FILE *table);
#define HF_MAX_FILES 128

/* The files hf_import and the vocabulary reading take from a folder: config.json, vocab.txt,
 * tokenizer_config.json when present, model.safetensors or model.safetensors.index.json and every
 * shard it names; each added to plan as an input (its role in messages: "HF config.json", ...).
 * The paths live in files (which must outlive the plan's check). */
typedef struct {
    char path[HF_MAX_FILES][4096];
    int count;
} HfFiles;
void hf_plan_inputs(const char *dir, HfFiles *files, IoPlan *plan);

/* tokenizer_config.json's do_lower_case (1 when the file or key is absent, as BertTokenizer);
 * fatal if strip_accents or tokenize_chinese_chars ask for what realpos's tokenizer cannot do. */
int hf_read_lower_case(const char *dir);

/* 1 if HF BertModel / BertFor* can express the model exactly, else 0 with every reason in why
 * ("(1) ...; (2) ..."), so that one export attempt names all there is to change. */
int hf_export_check(const Config *cfg, ModelHeads heads, char *why, size_t size);
/* Write config.json and model.safetensors of m into the existing directory dir (the model as
 * BertForMaskedLM, BertForSequenceClassification, BertForQuestionAnswering or, without heads,
 * BertModel). label_names: m->heads.num_labels classification labels, or NULL. Returns 0, or -1
 * with the reason in why (a write failed: the caller removes dir). */
int hf_export(const char *dir, const Config *cfg, const Model *m, const char *const *label_names, char *why,
              size_t why_size);
/* Write tokenizer_config.json into dir; 0, or -1 with the reason in why. */
int hf_write_tokenizer_config(const char *dir, int do_lower_case, int max_length, char *why, size_t why_size);
