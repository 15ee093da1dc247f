/* What a training run keeps in its directory (train.run_dir), shared by pretraining and
 * fine-tuning, and the rules that keep it safe:
 *   .lock                 flock of the one process that writes here (core/io/dir_lock.h)
 *   config.ini            the effective configuration of the run's first launch
 *   ckpt-NNNNNNN.h5       numbered checkpoints; the newest keep_last of the run's own lineage stay
 *   latest                "ckpt-NNNNNNN.h5\nrun RUN_ID\n": the newest checkpoint and its lineage
 *   lineage.tsv           "RUN_ID<TAB>ckpt-NNNNNNN.h5" per checkpoint a lineage wrote and kept
 *   metrics.jsonl/.csv, and what the task adds (fine-tuning: parameters.txt, the start's parameter
 *                         table; best.h5, model.h5, predictions)
 * A run has an id (32 hex digits), drawn at its first launch, stored in every checkpoint (root
 * attribute run_id) and in `latest`, and kept on --resume: pruning removes only checkpoints of
 * that lineage, never a file another run left. A fresh run never starts in a directory that holds
 * a run: it is refused, naming the choices, unless --overwrite moves the old run aside first. */
#pragma once
#include <stddef.h>

#include "core/io/dir_lock.h"
#include "train/model/checkpoint.h"

#define RUN_ID_HEX 32

typedef struct {
    char path[CONFIG_PATH_MAX];
    DirLock lock;
    char run_id[RUN_ID_HEX + 1];
} RunDir;

/* Lock path for this process (fatal naming the holder if another has it). A fresh run (resume =
 * 0) in a directory that holds a run is refused with the choices spelled out, unless overwrite:
 * then the old run is renamed to PATH.replaced-YYYYMMDD-HHMMSS (logged) and PATH starts empty.
 * Stale temp files of killed saves are removed. run_id is left empty: see run_dir_set_id. A
 * directory holds a run when run_dir_find_run finds one of its files. */
void run_dir_claim(RunDir *d, const char *path, int resume, int overwrite);
/* Whether path (existing) lies inside run_dir (existing), by real paths. */
int run_dir_contains(const char *run_dir, const char *path);
/* Fatal if `path` (named `what`, e.g. "key 'task.init_checkpoint'") lies inside run_dir, which a
 * fresh run is about to own. Nothing to check if either does not
 * exist yet. */
void run_dir_require_outside(const char *run_dir, const char *path, const char *what);
/* A run id: exactly RUN_ID_HEX lower-case hex digits. */
int run_id_valid(const char *id);
/* The lineage: the resumed checkpoint's run id, or a new random one (id NULL or not valid). */
void run_dir_set_id(RunDir *d, const char *id);
void run_dir_release(RunDir *d);

/* The first file of path that marks a run (latest, lineage.tsv, a checkpoint, metrics, config.ini,
 * model.h5, best.h5), or NULL: the directory is unused (a .lock alone does not count). */
const char *run_dir_find_run(const char *path);
/* Write RUN_DIR/config.ini (temp + rename). */
void run_dir_write_config(const RunDir *d, const char *config_ini);
/* RUN_DIR/ckpt-NNNNNNN.h5 of a step into out. */
void run_dir_checkpoint_name(char *out, size_t size, const char *run_dir, long step);
/* Save the step's checkpoint (temp + rename, with the run id), then point `latest` at it (temp +
 * rename), then delete all but the newest keep_last checkpoints of the lineage: a kill at any
 * moment leaves `latest` naming a complete checkpoint that exists. */
void run_dir_save_checkpoint(const RunDir *d, long step, int keep_last, const Model *m, CheckpointExtras extras);
/* The checkpoint path `latest` of run_dir names into out, if latest exists and the file it
 * names does; returns 0 otherwise. */
int run_dir_latest(const char *run_dir, char *out, size_t size);
/* The run id `latest` of run_dir records into out; returns 0 if there is none. */
int run_dir_latest_id(const char *run_dir, char *out, size_t size);
/* The run's own checkpoints, the one definition pruning keeps to: the steps lineage.tsv records
 * for the run id `latest` names, ascending, into *steps (caller frees); returns their number.
 * Fatal, starting with what (e.g. "average --last") and run_dir, if latest records no run id,
 * lineage.tsv is missing or records no checkpoint of the run, or a checkpoint it names does not
 * exist. */
int run_dir_lineage(const char *run_dir, const char *what, long **steps);
/* A --resume argument to a checkpoint path: a checkpoint file, RUN_DIR/latest or RUN_DIR itself
 * (then its latest). Fatal, naming the argument, if it leads to no checkpoint. */
void run_dir_resolve_checkpoint(const char *arg, char *out, size_t size);

/* Install the SIGINT/SIGTERM/SIGHUP/SIGUSR1 handler; stop_signal_received() then returns the
 * signal number once one arrived (0 before). Loops poll it between steps. SIGHUP is an ssh
 * session that dropped: it saves and stops like SIGTERM. */
void stop_signals_install(void);
int stop_signal_received(void);
