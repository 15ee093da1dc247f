/* HDF5 checkpoints (schema: docs/checkpoint.md).
 *   /            attributes format = "realpos", version = 1, config = effective INI text
 *   /model/...   every parameter, named after its HuggingFace BertForMaskedLM key ('.' -> '/')
 *   /optimizer/exp_avg/..., /optimizer/exp_avg_sq/...   (attribute step)
 * plus whatever the caller's extra writer adds (vocabulary, training state).
 * Writes go to PATH.tmp.PID in the same directory, sealed and fsynced, renamed into place when
 * complete and the directory fsynced (h5_commit: as durable as core/io/atomic_file.h); a failure
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
/* A checkpoint argument, as every command takes one (--resume, --checkpoint, --init, CKPT.h5,
 * task.init_checkpoint): a checkpoint file, RUN_DIR/latest, or RUN_DIR itself (then its latest).
 * The file's path into out. Fatal, starting with `what` (e.g. "--checkpoint", "key
 * 'task.init_checkpoint'"; NULL: the argument alone) and naming the argument, if it does not exist,
 * is neither, or is a run directory with no checkpoint yet. */
void checkpoint_resolve(const char *arg, const char *what, char *out, size_t size);
/* The checkpoint RUN_DIR/latest names (its first line, ckpt-NNNNNNN.h5) into out, if latest exists
 * and the file it names does; returns 0 otherwise. */
int checkpoint_latest(const char *run_dir, char *out, size_t size);
/* Whether name is a run's checkpoint file name, ckpt-NNNNNNN.h5 (7 to 18 digits): its step. */
int checkpoint_name_step(const char *name, long *step);

typedef struct {
    char path[CONFIG_PATH_MAX + 32]; /* the checkpoint file (a run directory resolved to its latest) */
    hid_t file;
    char *config_ini; /* the stored effective configuration text */
    Config cfg;       /* ... parsed */
    ModelHeads heads; /* what /model holds: MLM, pooler, classifier rows, span head */
} CheckpointFile;

/* Opens checkpoint_resolve(arg)'s file: a run directory or RUN_DIR/latest opens the run's newest. */
void checkpoint_file_open(CheckpointFile *c, const char *arg);
/* ... naming the argument as `what` in errors (e.g. "key 'task.init_checkpoint'"). */
void checkpoint_file_open_as(CheckpointFile *c, const char *arg, const char *what);
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
