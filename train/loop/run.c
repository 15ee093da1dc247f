/* The one training run (run.h). */
#include "train/loop/run.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "core/io/h5io.h"
#include "train/loop/data_identity.h"
#include "train/loop/peak.h"
#include "train/model/checkpoint.h"

/* Keys a resumed run may change: how long it trains and how it reports, saves and runs; none of
 * them changes the data stream, the model or the optimizer's update of the steps it continues. */
static const char *const RESUMABLE_KEYS[] = {
    "train.max_steps",   "train.log_interval", "train.eval_interval", "train.checkpoint_interval",
    "train.eval_batches", "train.keep_last",   "train.threads",       "train.run_dir",
    "train.shard_optimizer", "train.precision" /* checkpoints are fp32 either way */,
    "task.max_steps", "task.eval_every", "task.dev_file", "task.test_file" /* scored after the last step */,
    "task.init_checkpoint" /* read by a fresh run only */};

static int resumable(const KeySpec *key) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", key->section, key->name);
    for (size_t i = 0; i < sizeof RESUMABLE_KEYS / sizeof *RESUMABLE_KEYS; i++)
        if (!strcmp(name, RESUMABLE_KEYS[i]))
            return 1;
    return 0;
}

typedef struct {
    char refused[4096];
    size_t len;
    int num_refused;
} ResumeCheck;

static void check_resumed_key(const KeySpec *key, const char *now, const char *stored, void *ctx) {
    ResumeCheck *c = ctx;
    if (resumable(key)) {
        rp_log("resuming with key '%s.%s' = %s (the checkpoint's run had %s)", key->section, key->name, now, stored);
        return;
    }
    c->num_refused++;
    size_t room = sizeof c->refused - c->len;
    if (room > 1) {
        int n = snprintf(c->refused + c->len, room, "\n  key '%s.%s': the checkpoint has %s, this run %s", key->section,
                         key->name, stored, now);
        c->len = (size_t)n < room ? c->len + (size_t)n : sizeof c->refused - 1;
        if ((size_t)n >= room) /* the list goes on past the buffer: say so */
            memcpy(c->refused + sizeof c->refused - 5, "\n...", 5);
    }
}

/* What kind of run wrote a checkpoint, by its training state. */
static const char *checkpoint_kind(hid_t f) {
    if (h5_exists(f, "train/sampler_order"))
        return "fine-tuning";
    if (h5_exists(f, "train/data_state"))
        return "pretraining";
    return NULL;
}

/* Fatal unless the open checkpoint c holds the training state of a `kind` run. */
static void require_kind(const CheckpointFile *c, const char *kind) {
    const char *found = checkpoint_kind(c->file);
    RP_CHECK(found && h5_exists(c->file, "optimizer"), "--resume %s: no training state to resume from (a "
             "weights-only checkpoint such as model.h5, best.h5, an average or an import); --resume takes "
             "RUN_DIR/latest or RUN_DIR/ckpt-NNNNNNN.h5 of a `realpos %s` run", c->path,
             !strcmp(kind, "fine-tuning") ? "finetune" : "pretrain");
    RP_CHECK(!strcmp(found, kind), "--resume %s: a checkpoint of a %s run; this is %s (%s)", c->path, found, kind,
             !strcmp(kind, "fine-tuning") ? "to fine-tune its weights, set task.init_checkpoint to it; to continue "
                                            "pretraining it, `realpos pretrain --init` or `--resume` it"
                                          : "to pretrain from its weights, use `realpos pretrain --init`");
}

void run_require_resumable(const char *resume, const char *kind) {
    CheckpointFile c;
    checkpoint_file_open_as(&c, resume, "--resume");
    require_kind(&c, kind);
    checkpoint_file_close(&c);
}

void run_stored_config(StoredConfig *s, const char *resume, int num_sets, char *const *sets) {
    memset(s, 0, sizeof *s);
    CheckpointFile c;
    checkpoint_file_open_as(&c, resume, "--resume");
    snprintf(s->path, sizeof s->path, "%s", c.path);
    s->ini = xstrdup(c.config_ini);
    char dir[CONFIG_PATH_MAX + 32], here[PATH_MAX], stored[PATH_MAX];
    path_directory(dir, sizeof dir, s->path);
    int same_dir = realpath(dir, here) && realpath(c.cfg.train.run_dir, stored) && !strcmp(here, stored);
    checkpoint_file_close(&c);
    snprintf(s->run_dir_set, sizeof s->run_dir_set, "train.run_dir=%s", dir);
    if (!same_dir) /* the checkpoint's own directory; a train.run_dir of the command line comes later and wins */
        s->sets[s->num_sets++] = s->run_dir_set;
    for (int i = 0; i < num_sets && s->num_sets <= CLI_MAX_SETS; i++)
        s->sets[s->num_sets++] = sets[i];
    rp_log("resuming %s with the configuration stored in it (train.run_dir = %s)%s", s->path, dir,
           num_sets ? " and the command line's --set" : "");
}

void run_stored_config_free(StoredConfig *s) {
    free(s->ini);
    memset(s, 0, sizeof *s);
}

typedef struct {
    int signal;
    long step; /* 0: no signal */
} TestSignal;
static TestSignal test_signal_from_env(void);

/* Every environment variable a run reads, checked before the run directory is touched: a value
 * refused at step 1 would leave files that block the corrected command. */
static void run_check_environment(void) {
    peak_check_environment();
    test_signal_from_env();
    env_switch("REALPOS_BF16_EMULATE", 0);
    env_switch("REALPOS_NO_BF16", 0);
}

void run_begin(Run *run, const Config *cfg, const char *config_path, Dist *dist, const RunStart *start) {
    memset(run, 0, sizeof *run);
    run->cfg = cfg;
    run->config_path = config_path;
    run->dist = dist;
    run->dir.lock.fd = -1;
    run_check_environment(); /* a bad value refuses the run before its directory is touched */
    if (start->resume)
        run_dir_resolve_checkpoint(start->resume, run->resume_path, sizeof run->resume_path);
    if (!start->resume) /* a resume reads and writes its own run directory */
        for (int i = 0; i < start->num_inputs; i++)
            run_dir_require_outside(cfg->train.run_dir, start->inputs[i].path, start->inputs[i].what);
    if (dist_is_root(dist))
        run_dir_claim(&run->dir, cfg->train.run_dir, start->resume != NULL, start->overwrite);
    if (!start->resume)
        return;
    run->resume = &run->resume_file;
    checkpoint_file_open(run->resume, run->resume_path);
    require_kind(run->resume, start->kind);
}

void run_check_resume(Run *run) {
    if (!run->resume || run->resume_checked)
        return;
    run->resume_checked = 1;
    ResumeCheck check = {"", 0, 0};
    config_each_difference(run->cfg, &run->resume->cfg, check_resumed_key, &check);
    if (!check.num_refused)
        return;
    char allowed[512] = "";
    for (size_t i = 0, len = 0; i < sizeof RESUMABLE_KEYS / sizeof *RESUMABLE_KEYS && len < sizeof allowed; i++)
        len += (size_t)snprintf(allowed + len, sizeof allowed - len, "%s%s", i ? ", " : "", RESUMABLE_KEYS[i]);
    RP_FATAL("--resume %s: %d setting%s changed since the checkpoint was written:%s\na resumed run continues the same "
             "data stream, model and optimizer: undo the change%s, or start a fresh run in another train.run_dir (keys "
             "that may change: %s)", run->resume_path, check.num_refused, check.num_refused > 1 ? "s" : "",
             check.refused, check.num_refused > 1 ? "s" : "", allowed);
}

/* Weights, moments, step, lineage and the task's state of the resumed checkpoint. */
static void resume_state(Run *run) {
    hid_t f = run->resume->file;
    const char *path = run->resume_path;
    run_check_resume(run);
    data_identity_check(f, path, run->task.data_identity);
    checkpoint_load_model(f, path, run->model);
    activations_refresh_weights(run->task.head.acts, run->model); /* bf16: AdamW keeps the copy after */
    AdamW full = dp_adamw_full(&run->ts.opt, run->model->grads); /* every rank reads, keeps its shard */
    RP_CHECK(checkpoint_load_optimizer(f, path, run->model, &full), "%s: no optimizer state to resume from", path);
    dp_adamw_scatter(&run->ts.opt, &full);
    dp_adamw_release(&run->ts.opt);
    int64_t step;
    hsize_t one = 1;
    h5_read_int64s(f, path, "train/step", &step, 1, &one);
    RP_CHECK(step >= 0 && step <= CHECKPOINT_MAX_STEP && step == run->ts.opt.opt.step,
             "%s: dataset 'train/step': expected the optimizer's step count %lld (in [0, %lld]), got %lld", path,
             (long long)run->ts.opt.opt.step, (long long)CHECKPOINT_MAX_STEP, (long long)step);
    run->step = (long)step;
    run->has_resumed_window = h5_exists(f, "train/metrics_window"); /* absent: written by an older realpos */
    if (run->has_resumed_window) {
        double words[STEP_WINDOW_WORDS];
        h5_read_doubles(f, path, "train/metrics_window", words, STEP_WINDOW_WORDS);
        StepWindow *w = &run->resumed_window;
        *w = step_window_unpack(words);
        int finite = 1;
        for (int i = 0; i < STEP_WINDOW_WORDS; i++)
            finite &= isfinite(words[i]) && (i == 2 || words[i] >= 0); /* only the loss sum may be negative */
        RP_CHECK(finite && w->start <= run->step && w->correct <= w->predictions,
                 "%s: dataset 'train/metrics_window': expected finite non-negative sums of a window starting at or "
                 "before step %ld, got elapsed %g s, start %ld, correct %ld of %ld", path, run->step, w->elapsed_s,
                 w->start, w->correct, w->predictions);
    }
    if (run->task.read_state)
        run->task.read_state(run->task.ctx, f, path);
    if (dist_is_root(run->dist)) {
        char *id = h5_attr_exists(f, "run_id") ? h5_attr_read_string(f, "run_id", path) : NULL;
        /* a directory holding a run takes only a checkpoint of its own: one inside it, or one whose
         * lineage its latest records */
        char there[RUN_ID_HEX + 1] = "";
        int has_there = run_dir_latest_id(run->dir.path, there, sizeof there);
        const char *used = run_dir_contains(run->dir.path, path) ? NULL : run_dir_find_run(run->dir.path);
        RP_CHECK(!used || (run_id_valid(id) && has_there && !strcmp(there, id)),
                 "--resume %s: train.run_dir %s holds another run (%s; its latest records run %s, the checkpoint run "
                 "%s): resuming there would mix two runs' checkpoints; resume in the checkpoint's own directory or "
                 "in a new train.run_dir", path, run->dir.path, used, has_there ? there : "none",
                 run_id_valid(id) ? id : "none");
        if (!run_id_valid(id))
            rp_log("%s has no run id (written by an older realpos): the run continues as a new lineage; older "
                   "checkpoints in %s are not pruned", path, run->dir.path);
        run_dir_set_id(&run->dir, id);
        free(id);
    }
    checkpoint_file_close(run->resume);
    run->resume = NULL;
    rp_log("resumed from %s at step %ld", path, run->step);
}

/* The checkpoint's training state: /train/step, then the task's. */
static void write_run_state(hid_t file, const void *ctx) {
    const Run *run = ctx;
    int64_t step = run->step;
    hsize_t one = 1;
    h5_write_int64s(file, "train/step", &step, 1, &one);
    data_identity_write(file, run->task.data_identity);
    double window[STEP_WINDOW_WORDS];
    StepWindow w = train_step_window(&run->ts);
    step_window_pack(&w, window);
    h5_write_doubles(file, "train/metrics_window", window, STEP_WINDOW_WORDS);
    run->task.write_state(file, run->task.ctx);
}

void run_save(Run *run) {
    AdamW full = dp_adamw_full(&run->ts.opt, run->model->grads); /* ZeRO-1: gathered through the free grads */
    dp_adamw_gather(&run->ts.opt, &full);
    if (dist_is_root(run->dist)) {
        CheckpointExtras extras = {run->config_ini, &full, write_run_state, run, NULL};
        run_dir_save_checkpoint(&run->dir, run->step, run->cfg->train.keep_last, run->model, extras);
    }
    dp_adamw_release(&run->ts.opt);
}

void run_save_weights(Run *run, const char *name, void (*write_extra)(hid_t, const void *), const void *ctx) {
    char path[CONFIG_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", run->dir.path, name);
    CheckpointExtras extras = {run->config_ini, NULL, write_extra, ctx, run->dir.run_id};
    checkpoint_save(path, run->model, &extras);
}

/* Every rank must start the same run: the same effective configuration and data, from the same step. */
static void require_agreement(Run *run) {
    const char *data = run->task.data_identity ? run->task.data_identity : "(not given)";
    size_t len = strlen(run->config_ini) + sizeof run->resume_path + strlen(data) + 80;
    char *text = xmalloc(len);
    snprintf(text, len, "%s[run]\nstart_step = %ld\ntotal_steps = %ld\nresume = %s\ndata = %s\n", run->config_ini,
             run->step, run->task.schedule.total_steps, run->resume_path[0] ? run->resume_path : "(none: a fresh run)",
             data);
    dist_require_same_text(run->dist, text, "run (effective configuration, data and starting step)");
    free(text);
}

/* REALPOS_TEST_SIGNAL_AT_STEP=SIG:N (tests only): the signal SIG (TERM, INT, HUP, USR1, KILL or
 * STOP) raised by the process itself at a fixed point of the run: after update N (step N >= 1), its
 * evaluation and its checkpoint, before update N + 1. A stop signal is then seen by update N + 1,
 * whose checkpoint is the one saved; KILL leaves checkpoint N (if N is a checkpoint step) as the
 * latest. Tests thereby interrupt a run at the same step on any host, instead of racing a signal
 * sent from outside against the host's speed. Unset or empty: nothing; malformed: fatal. Under
 * mpirun every rank whose environment has it raises it: a stop signal on one rank stops them all
 * after the same update; KILL belongs to rank 0 alone (the others do not wait for its checkpoint
 * to be written). */
static TestSignal test_signal_from_env(void) {
    static const struct {
        const char *name;
        int signal;
    } names[] = {{"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"USR1", SIGUSR1}, {"KILL", SIGKILL},
                 {"STOP", SIGSTOP}};
    const char *var = "REALPOS_TEST_SIGNAL_AT_STEP", *text = getenv(var);
    TestSignal t = {0, 0};
    if (!text || !*text)
        return t;
    const char *colon = strchr(text, ':');
    for (size_t i = 0; colon && i < sizeof names / sizeof *names; i++)
        if (strlen(names[i].name) == (size_t)(colon - text) && !strncmp(text, names[i].name, (size_t)(colon - text)))
            t.signal = names[i].signal;
    char *end = NULL;
    if (colon && colon[1] >= '0' && colon[1] <= '9')
        t.step = strtol(colon + 1, &end, 10);
    RP_CHECK(t.signal && end && *end == '\0' && t.step >= 1 && t.step < LONG_MAX,
             "environment variable %s: expected SIGNAL:STEP, SIGNAL one of TERM, INT, HUP, USR1, KILL, STOP and "
             "STEP a whole number >= 1 (e.g. TERM:30), got '%s'", var, text);
    return t;
}

static void stop_and_save(Run *run) {
    if (stop_signal_received())
        rp_log("signal %d: saving a checkpoint at step %ld and stopping", stop_signal_received(), run->step);
    else
        rp_log("a stop signal on another rank: saving a checkpoint at step %ld and stopping", run->step);
    run_save(run);
}

/* The step at which the task reached its goal (-1: not reached), rank 0's answer on every rank. */
static long goal_step(Run *run) {
    if (!run->task.goal_step)
        return -1;
    float step = dist_is_root(run->dist) ? (float)run->task.goal_step(run->task.ctx) : 0.0f;
    dist_broadcast(run->dist, &step, 1); /* exact: steps are far below 2^24 */
    return (long)step;
}

int run_train(Run *run, const char *config_ini, Model *model, const RunTask *task) {
    const TrainConfig *tc = &run->cfg->train;
    int root = dist_is_root(run->dist), resumed = run->resume != NULL;
    TestSignal test_signal = test_signal_from_env();
    run->config_ini = config_ini;
    run->model = model;
    run->task = *task;
    StepConfig sc = task->schedule;
    sc.run_dir = tc->run_dir;
    TrainStep *ts = &run->ts;
    train_step_init(ts, &sc, model, task->head, task->source, &run->cfg->optim, run->dist, tc->shard_optimizer);
    if (resumed)
        resume_state(run);
    else if (root)
        run_dir_set_id(&run->dir, NULL);
    require_agreement(run);
    long total = task->schedule.total_steps, reached = goal_step(run);
    if (reached >= 0) {
        rp_log("%s stopped at step %ld on reaching its goal (task.stop_accuracy): nothing to do", run->resume_path,
               reached);
        return 0;
    }
    if (run->step >= total) {
        rp_log("%s is at step %ld and the run has %ld steps: nothing to do (raise %s to train further)",
               run->resume_path, run->step, total,
               !strcmp(task->name, "fine-tuning") ? "task.max_steps or task.epochs" : "train.max_steps");
        return 0;
    }
    dist_broadcast(run->dist, model->params, model->table.block_floats); /* rank 0's bits everywhere */
    if (root) { /* rank 0 alone writes the run directory */
        if (!resumed)
            run_dir_write_config(&run->dir, config_ini);
        metrics_open(&run->log, run->dir.path, resumed, run->step);
    }
    stop_signals_install();
    train_step_begin(ts, root ? &run->log : NULL, run->step);
    if (run->has_resumed_window) /* elapsed_s continues; the open window's sums carry on */
        train_step_resume_window(ts, &run->resumed_window);
    else if (resumed)
        rp_log("%s holds no metrics window (written by an older realpos): elapsed_s restarts at 0 and the first "
               "record covers the steps since the resume", run->resume_path);
    char peak[4608];
    peak_describe(&ts->peak, peak, sizeof peak);
    rp_log("%s: steps %ld..%ld of %d x %d micro-batches, %d rank%s x %d threads, MFU peak per rank %s", task->name,
           run->step, total, sc.grad_accum_steps, task->head.acts->B, run->dist->size,
           run->dist->size > 1 ? "s" : "", omp_get_max_threads(), peak);
    if (sc.grad_accum_steps % run->dist->size)
        rp_log("note: train.grad_accum_steps = %d is not a multiple of the %d ranks: some ranks idle each step",
               sc.grad_accum_steps, run->dist->size);
    long first_step = run->step;
    while (run->step < total && !ts->stop) {
        train_step(ts, run->step);
        run->step++;
        if (task->eval_interval > 0 && run->step % task->eval_interval == 0 && run->step < total && !ts->stop) {
            task->evaluate(task->ctx, run, 0);
            if (goal_step(run) >= 0)
                break; /* as after the last step: the final evaluation, finish, a checkpoint */
        }
        if (run->step % tc->checkpoint_interval == 0 && run->step < total && !ts->stop)
            run_save(run);
        if (run->step == test_signal.step)
            raise(test_signal.signal);
    }
    train_step_log_communication(ts, run->step - first_step);
    if (ts->stop && run->step < total) { /* a signal reached some rank: every rank leaves after the same step */
        stop_and_save(run);
    } else {
        task->evaluate(task->ctx, run, 1);
        if (task->finish)
            task->finish(task->ctx, run);
        if (task->save_final)
            run_save(run);
    }
    if (root)
        metrics_close(&run->log);
    return 0;
}

void run_end(Run *run) {
    if (run->resume)
        checkpoint_file_close(run->resume);
    train_step_free(&run->ts);
    run_dir_release(&run->dir);
}
