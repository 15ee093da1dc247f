/* Loading a checkpoint for inference commands (attention, fill-mask, export-hf): the checkpoint's
 * config and model through CheckpointFile (train/model/checkpoint.h, the one way to open one),
 * plus its vocabulary as a tokenizer. Here rather than in train/model because the tokenizer is
 * train/data's, a peer wing of train/model. */
#pragma once
#include "train/config/config.h"
#include "train/data/tokenizer.h"
#include "train/model/model.h"

typedef struct {
    Config cfg;
    char *config_ini;
    Model model;
    char *vocab_text;         /* the checkpoint's /vocab, else the --vocab file */
    const char *vocab_origin; /* where it came from, for messages */
    Tokenizer *tok;
} LoadedModel;

/* The vocabulary is the checkpoint's /vocab, else vocab_path, else its config's [data] vocab; a
 * vocab_path that differs from the checkpoint's /vocab is refused (naming the first differing line).
 * Fatal (naming the file) if the checkpoint is broken, no vocabulary is found, or
 * the vocabulary's size differs from model.vocab_size. */
void load_model_with_vocab(LoadedModel *out, const char *checkpoint, const char *vocab_path);
void loaded_model_free(LoadedModel *lm);
