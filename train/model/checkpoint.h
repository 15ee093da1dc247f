/* HDF5 checkpoints (schema: docs/checkpoint.md).
 *   /            attributes format = "realpos", version = 1, config = effective INI text
 *   /model/...   every parameter, named after its HuggingFace BertForMaskedLM key ('.' -> '/')
 *   /optimizer/exp_avg/..., /optimizer/exp_avg_sq/...   (attribute step)
 * plus whatever the caller's extra writer adds (vocabulary, training state).
 * Writes go to PATH.tmp.PID in the same directory, sealed and fsynced, renamed into place when
 * complete and the directory fsynced (h5_commit: as durable as core/atomic_file.h); a failure
 * removes the temporary file and names it (PATH.tmp.PID) with the system's reason. */
#pragma once
#include <hdf5.h>

#include "optim/adamw.h"
#include "train/config/config.h"
#include "train/model/model.h"

#define CHECKPOINT_FORMAT "realpos"
#define CHECKPOINT_VERSION 1
/* Largest step count a checkpoint may record (/train/step, /optimizer step). */
#define CHECKPOINT_MAX_STEP 2147483647LL

typedef struct {
    const char *config_ini;       /* required */
    const AdamW *optimizer;       /* NULL: no /optimizer group */
    /* Optional hook to add datasets (e.g. /vocab, /train) before the file is closed. */
    void (*write_extra)(hid_t file, const void *ctx);
    const void *extra_ctx;
    const char *run_id; /* the run's lineage (train/loop/run_dir.h): root attribute run_id; NULL: none */
} CheckpointExtras;

void checkpoint_save(const char *path, const Model *m, const CheckpointExtras *extras);

/* A checkpoint opened for reading: its checksum verified before libhdf5 parses it, its format
 * and version checked, its stored configuration parsed (range checks, the [model] cross-checks)
 * and the heads its /model holds found. The one way every command opens a checkpoint. */
typedef struct {
    const char *path;
    hid_t file;
    char *config_ini; /* the stored effective configuration text */
    Config cfg;       /* ... parsed */
    ModelHeads heads; /* what /model holds: MLM, pooler, classifier rows, span head */
} CheckpointFile;

void checkpoint_file_open(CheckpointFile *c, const char *path);
void checkpoint_file_close(CheckpointFile *c);
/* c's model: m built from its [model] and its heads, every parameter loaded (inference: no
 * gradient block, as model_create_inference). */
void checkpoint_file_model(const CheckpointFile *c, Model *m, int inference);
/* Read every parameter of m's table, validating presence, dtype and shape. */
void checkpoint_load_model(hid_t file, const char *path, Model *m);
/* Read optimizer moments and step; returns 0 (and leaves opt untouched) if absent. */
int checkpoint_load_optimizer(hid_t file, const char *path, const Model *m, AdamW *opt);
/* Call visit(name, rank, dims, ctx) for every dataset under /model, in name order (name relative
 * to /model, e.g. "cls/predictions/bias"). */
void checkpoint_each_model_dataset(hid_t file, const char *path,
                                   void (*visit)(const char *name, int rank, const hsize_t *dims, void *ctx),
                                   void *ctx);
/* Write a parameter-shaped block under `group` (e.g. "grad") with the table's names. */
void checkpoint_write_block(hid_t file, const char *group, const ParamTable *t, const float *block);
/* Vocabulary stored in checkpoints: dataset /vocab (the vocab.txt text) with attribute
 * do_lower_case. Returns NULL if the checkpoint has none. */
char *checkpoint_read_vocab(hid_t file, const char *path, int *do_lower_case);
void checkpoint_write_vocab(hid_t file, const char *vocab_text, int do_lower_case);
