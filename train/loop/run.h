/* The one training run: pretraining and fine-tuning are two tasks of it (as Caffe's Solver runs
 * nets that differ only in their loss layer). The run owns, once:
 *   - the run directory: one owner (lock), one lineage (run id), a fresh run never mixed into an
 *     old one, config.ini, rotating checkpoints, `latest`, metrics files (run_dir.h, metrics.h);
 *   - the optimizer (data-parallel AdamW over the job's ranks; N = 1 the trivial case) and the
 *     step (step.h);
 *   - save, resume (refusing changed settings, naming each key), the signal stop, the evaluation
 *     schedule, and the job-wide agreement on the configuration and the starting step.
 * A task supplies what differs (RunTask): its batch source and loss head, its schedule, its
 * held-out evaluation, the training state its checkpoints carry, and what it writes at the end.
 *
 *   run_begin      lock the directory, decide fresh / resume / --overwrite, open the resumed
 *                  checkpoint (run.resume) so the task can build its model and data from it
 *   (the task builds its model, data and RunTask)
 *   run_train      optimizer; weights, moments, step and task state from run.resume; every
 *                  rank agrees (config, start and total steps); rank 0's weights everywhere;
 *                  config.ini (a fresh run) and metrics; the loop:
 *                    while step < total and no stop:  train_step; step++
 *                      every eval_interval steps, before the last and without a stop: task.evaluate,
 *                        then, if the task has reached its goal (task.goal_step, rank 0's word for
 *                        every rank), leave the loop as after the last step
 *                      every checkpoint_interval, before the last and without a stop: run_save
 *                    a stop before the last step:  run_save
 *                    else:  task.evaluate(final), task.finish, run_save if task.save_final
 *   run_end        release everything. */
#pragma once
#include <hdf5.h>

#include "core/config/cli.h"
#include "optim/dist.h"
#include "train/config/config.h"
#include "train/loop/metrics.h"
#include "train/loop/run_dir.h"
#include "train/loop/step.h"

typedef struct Run Run;

/* A file the task reads, named in errors (e.g. "key 'task.init_checkpoint'"). */
typedef struct {
    const char *path, *what;
} RunInput;

/* How the command asked to start: --resume (a checkpoint, RUN_DIR/latest or RUN_DIR), --overwrite
 * (move an old run in train.run_dir aside), and what it reads: a fresh run refuses inputs inside
 * the directory it is about to own (they would be mixed with its files, or moved by --overwrite). */
typedef struct {
    const char *kind; /* "pretraining" | "fine-tuning": what a resumed checkpoint must be */
    const char *resume;
    int overwrite;
    RunInput inputs[8];
    int num_inputs;
    int verbose; /* --verbose: tables (e.g. --init's parameter table) on stderr too, not only in RUN_DIR */
} RunStart;

/* What a task gives the run. Callbacks get the task's ctx. */
typedef struct {
    const char *name; /* "pretraining" | "fine-tuning", in log lines */
    BatchSource source;
    LossHead head;
    StepConfig schedule;   /* run_dir is set by the run */
    int eval_interval;     /* steps between held-out evaluations (0: only at the end) */
    int save_final;        /* 1: a last checkpoint after the final step (pretraining) */
    const char *data_identity; /* one line naming the training data, which every rank must share */
    void *ctx;
    /* Held-out evaluation after run->step updates, called on every rank (a task that evaluates on
     * rank 0 only returns on the others); final = after the last step. */
    void (*evaluate)(void *ctx, Run *run, int final);
    /* Add the task's state (/vocab, /train/...) to a checkpoint being written (rank 0). */
    void (*write_state)(hid_t file, const void *ctx);
    /* Restore it from the resumed checkpoint (every rank). NULL: nothing to restore. */
    void (*read_state)(void *ctx, hid_t file, const char *path);
    /* After the last step and its evaluation (fine-tuning: model.h5). NULL: nothing. */
    void (*finish)(void *ctx, Run *run);
    /* The step at which the task reached its goal and the run ends early (fine-tuning:
     * task.stop_accuracy), -1 while it has not; read on rank 0 after each evaluation and after a
     * resume (a run that reached it has nothing left to do). NULL: the run ends at its last step. */
    long (*goal_step)(const void *ctx);
} RunTask;

struct Run {
    const Config *cfg;      /* the effective configuration */
    const char *config_ini; /* its text, stored in every checkpoint */
    const char *config_path;
    Dist *dist;
    RunDir dir;             /* rank 0 owns and writes it */
    /* The checkpoint being resumed (NULL: a fresh run), open from run_begin to run_train. */
    CheckpointFile *resume, resume_file;
    char resume_path[CONFIG_PATH_MAX + 32];
    int resume_checked;     /* run_check_resume ran */
    Model *model;
    TrainStep ts;           /* the step and its optimizer (ts.opt: whole moments, or this rank's
                             * ZeRO-1 shard, train.shard_optimizer) */
    MetricsLog log;         /* rank 0 */
    long step;              /* updates done */
    StepWindow resumed_window; /* the resumed checkpoint's metrics window, if it has one */
    int has_resumed_window;
    RunTask task;
};

/* What `pretrain --resume RUN_DIR` / `finetune --resume RUN_DIR` without CONFIG.ini run with: the
 * resumed checkpoint's stored configuration (ini, its keys' origin `path`, the checkpoint file),
 * with train.run_dir set to the checkpoint's own directory and then the command line's --set on
 * top (sets; the lineage check still refuses those a resume may not change). */
typedef struct {
    char path[CONFIG_PATH_MAX + 32];
    char *ini;
    char run_dir_set[CONFIG_PATH_MAX + 64]; /* "train.run_dir=DIR" */
    char *sets[CLI_MAX_SETS + 1];
    int num_sets;
} StoredConfig;
void run_stored_config(StoredConfig *s, const char *resume, int num_sets, char *const *sets);
/* Fatal unless `resume` (a checkpoint, RUN_DIR/latest or RUN_DIR) holds the training state of a
 * `kind` run ("pretraining", "fine-tuning"): the first check of --resume, before the configuration
 * is read, so that a checkpoint of the other job is named as such, not by a key its config lacks. */
void run_require_resumable(const char *resume, const char *kind);
void run_stored_config_free(StoredConfig *s);

/* Claim train.run_dir (rank 0), resolve and open start->resume (a checkpoint of start->kind with
 * training state). No model yet: the task builds it from cfg, or from run->resume. */
void run_begin(Run *run, const Config *cfg, const char *config_path, Dist *dist, const RunStart *start);
/* Fatal, naming every key with both values, if the resumed checkpoint's settings differ from *cfg
 * in a key that changes what the steps compute; the safe ones (train.max_steps, the intervals,
 * threads, keep_last...) are logged. Once; run_train calls it if the task did not. */
void run_check_resume(Run *run);
/* Train `model` with `task` to the end or a stop signal (see above); config_ini is the effective
 * configuration (*cfg) stored in every checkpoint. Returns 0 (after the end, a saved stop, or
 * nothing to do); every failure is fatal. */
int run_train(Run *run, const char *config_ini, Model *model, const RunTask *task);
/* A checkpoint of the current step in the run directory (every rank calls; rank 0 writes). */
void run_save(Run *run);
/* The model's weights (no optimizer) at RUN_DIR/name, e.g. model.h5, with write_extra's datasets
 * (rank 0). */
void run_save_weights(Run *run, const char *name, void (*write_extra)(hid_t file, const void *ctx), const void *ctx);
void run_end(Run *run);
