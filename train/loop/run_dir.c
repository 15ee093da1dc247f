/* Run directory: ownership, lineage, config, rotating checkpoints, `latest`, stop signals
 * (run_dir.h). */
#include "train/loop/run_dir.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "train/config/config.h"

/* Set by the stop-signal handler, polled between steps: the only state a signal handler may
 * touch, hence file scope. */
static volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) { stop_signal = sig; }

void stop_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);  /* the terminal or ssh session went away */
    sigaction(SIGUSR1, &sa, NULL); /* what mpirun forwards to every rank (SIGTERM it turns into a kill) */
}

int stop_signal_received(void) { return (int)stop_signal; }

/* The files a run leaves; a directory holding any of them holds a run. */
static const char *const RUN_FILES[] = {"latest", "lineage.tsv", "metrics.jsonl", "metrics.csv", "config.ini", "model.h5", "best.h5"};

/* "ckpt-" then 7 or more digits then ".h5" (what run_dir_checkpoint_name writes), nothing else. */
const char *run_dir_find_run(const char *path) {
    static const char checkpoint[] = "ckpt-NNNNNNN.h5 checkpoints";
    char file[CONFIG_PATH_MAX + 32];
    for (size_t i = 0; i < sizeof RUN_FILES / sizeof *RUN_FILES; i++) {
        snprintf(file, sizeof file, "%s/%s", path, RUN_FILES[i]);
        if (access(file, F_OK) == 0)
            return RUN_FILES[i];
    }
    DIR *dir = opendir(path);
    if (!dir)
        return NULL;
    const char *found = NULL;
    struct dirent *e;
    long step;
    while (!found && (e = readdir(dir)))
        if (checkpoint_name_step(e->d_name, &step))
            found = checkpoint;
    closedir(dir);
    return found;
}

/* Fatal unless the run directory at path can be moved aside: not the root, not a mount point (rename(2) cannot move either), and not the working
 * directory of this command or a directory above it (the command would move itself, and the
 * paths it reads, away). */
static void require_movable(const char *path) {
    char real[PATH_MAX], cwd[PATH_MAX], parent[PATH_MAX + 4];
    RP_CHECK(realpath(path, real), "--overwrite: train.run_dir %s: %s", path, strerror(errno));
    RP_CHECK(strcmp(real, "/"), "--overwrite: train.run_dir %s is the root directory: it cannot be moved aside; "
             "choose another train.run_dir", path);
    if (getcwd(cwd, sizeof cwd)) {
        size_t n = strlen(real);
        RP_CHECK(strncmp(cwd, real, n) || (cwd[n] != '\0' && cwd[n] != '/'),
                 "--overwrite: train.run_dir %s (%s) %s of this command: moving it aside would move the "
                 "directory the command runs in, and what it reads there; run the command from outside "
                 "it, or choose another train.run_dir", path, real,
                 cwd[n] ? "holds the working directory" : "is the working directory");
    }
    struct stat st, up;
    snprintf(parent, sizeof parent, "%s/..", real);
    RP_CHECK(stat(real, &st) == 0 && stat(parent, &up) == 0 && st.st_dev == up.st_dev,
             "--overwrite: train.run_dir %s (%s) is a mount point: it cannot be moved aside; remove the old "
             "run's files by hand or choose another train.run_dir", path, real);
}

/* Rename path to PATH.replaced-YYYYMMDD-HHMMSS (-N if taken); the lock moves with it. `path` may
 * end in slashes (as tab completion writes it): the new name is the directory's, not one inside it. */
static void move_run_aside(const char *path, char *moved, size_t size) {
    char name[CONFIG_PATH_MAX];
    snprintf(name, sizeof name, "%s", path);
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/'; n--)
        name[n - 1] = '\0';
    require_movable(path);
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    for (int n = 0;; n++) {
        int len = n ? snprintf(moved, size, "%s.replaced-%s-%d", name, stamp, n)
                    : snprintf(moved, size, "%s.replaced-%s", name, stamp);
        RP_CHECK(len > 0 && (size_t)len < size, "%s: path too long to move aside", path);
        if (access(moved, F_OK) != 0)
            break;
    }
    RP_CHECK(rename(name, moved) == 0, "--overwrite: cannot move the old run %s aside to %s: %s", path, moved,
             strerror(errno));
}

void run_dir_claim(RunDir *d, const char *path, int resume, int overwrite) {
    memset(d, 0, sizeof *d);
    d->lock.fd = -1;
    RP_CHECK(strlen(path) < sizeof d->path, "key 'train.run_dir': path too long");
    snprintf(d->path, sizeof d->path, "%s", path);
    dir_lock_acquire(&d->lock, path, "key 'train.run_dir'");
    const char *used = resume ? NULL : run_dir_find_run(path);
    if (used && overwrite) {
        char moved[CONFIG_PATH_MAX + 64];
        DirLock old = d->lock;
        move_run_aside(path, moved, sizeof moved);
        dir_lock_acquire(&d->lock, path, "key 'train.run_dir'"); /* the new, empty directory */
        dir_lock_release(&old);
        rp_log("--overwrite: moved the previous run in %s to %s", path, moved);
    } else if (used) {
        char latest[CONFIG_PATH_MAX + 16];
        snprintf(latest, sizeof latest, "%s/latest", path);
        RP_CHECK(access(latest, F_OK) != 0, "%s (key 'train.run_dir') already holds a run (%s): a fresh run would mix "
                 "its files with it. Continue it with --resume %s, choose another train.run_dir, or pass --overwrite "
                 "to move the old run aside (to %s.replaced-DATE-TIME) and start afresh", path, used, latest, path);
        RP_FATAL("%s (key 'train.run_dir') already holds a run (%s) but no %s to "
                 "resume it from (it stopped before its first checkpoint): a fresh run would mix its files with it. Choose another train.run_dir, or pass "
                 "--overwrite to move the old run aside (to %s.replaced-DATE-TIME) and start afresh", path, used,
                 latest, path);
    }
    remove_stale_temp_files(path);
}

int run_dir_contains(const char *run_dir, const char *path) {
    char dir_real[PATH_MAX], path_real[PATH_MAX];
    if (!path || !path[0] || !realpath(run_dir, dir_real) || !realpath(path, path_real))
        return 0;
    size_t n = strlen(dir_real);
    return !strncmp(path_real, dir_real, n) && (path_real[n] == '/' || path_real[n] == '\0');
}

void run_dir_require_outside(const char *run_dir, const char *path, const char *what) {
    RP_CHECK(!run_dir_contains(run_dir, path),
             "%s %s lies inside train.run_dir %s, which a fresh run owns: its files would be mixed with the run's "
             "(or moved aside by --overwrite). Copy it elsewhere, choose another train.run_dir, or resume the run "
             "in %s with --resume %s/latest", what, path, run_dir, run_dir, run_dir);
}

int run_id_valid(const char *id) {
    return id && strlen(id) == RUN_ID_HEX && strspn(id, "0123456789abcdef") == RUN_ID_HEX;
}

void run_dir_set_id(RunDir *d, const char *id) {
    if (run_id_valid(id)) {
        snprintf(d->run_id, sizeof d->run_id, "%s", id);
        return;
    }
    unsigned char bytes[RUN_ID_HEX / 2];
    RP_CHECK(getrandom(bytes, sizeof bytes, 0) == (ssize_t)sizeof bytes, "cannot draw a run id: %s",
             strerror(errno));
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(d->run_id + 2 * i, 3, "%02x", bytes[i]);
}

void run_dir_release(RunDir *d) { dir_lock_release(&d->lock); }

void run_dir_write_config(const RunDir *d, const char *config_ini) {
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.ini", d->path);
    write_file(path, config_ini, strlen(config_ini));
}

void run_dir_checkpoint_name(char *out, size_t size, const char *run_dir, long step) {
    snprintf(out, size, "%s/ckpt-%07ld.h5", run_dir, step);
}

/* RUN_DIR/lineage.tsv: "RUN_ID<TAB>ckpt-NNNNNNN.h5" per checkpoint the run's lineage wrote, so that
 * pruning (and `average --last`) knows what is its own without opening any HDF5 file. */
static void lineage_path(char *out, size_t size, const char *run_dir) { snprintf(out, size, "%s/lineage.tsv", run_dir); }

/* One line of lineage.tsv: 1 and its run id, checkpoint name and step, or 0. */
static int lineage_line(const char *line, char id[64], char name[64], long *step) {
    return sscanf(line, "%63s %63s", id, name) == 2 && checkpoint_name_step(name, step);
}

/* Record step's checkpoint in the lineage; with prune, also delete all but the newest keep_last
 * of the lineage's checkpoints and drop them from the record. Entries beyond step belong to a
 * future the resumed run abandoned: they leave the record (their files stay, never pruned) so
 * that they cannot push out what the run writes now. Other runs' lines are kept as they are. */
static void record_lineage(const RunDir *d, long step, int keep_last, int prune) {
    char path[CONFIG_PATH_MAX + 32], ckpt[CONFIG_PATH_MAX + 32];
    lineage_path(path, sizeof path, d->path);
    size_t old_len = 0;
    char *old = access(path, F_OK) == 0 ? read_file(path, &old_len, "the run's checkpoint lineage") : xstrdup("");
    int max_own = 1;
    for (size_t i = 0; i < old_len; i++)
        max_own += old[i] == '\n';
    long *own = xmalloc(sizeof(long) * (size_t)max_own);
    int n_own = 0;
    own[n_own++] = step;
    size_t cap = old_len + (size_t)(max_own + 1) * (RUN_ID_HEX + 24), len = 0;
    char *text = xmalloc(cap);
    for (char *line = old, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        char id[64], name[64];
        long s;
        if (lineage_line(line, id, name, &s) && !strcmp(id, d->run_id)) {
            if (s < step)
                own[n_own++] = s;
            else if (s > step && !prune) /* logged once, by the first of the two calls */
                rp_log("note: %s of this run's abandoned later steps stays, unpruned (resumed from an earlier step)",
                       name);
        } else if (line[0]) {
            len += (size_t)snprintf(text + len, cap - len, "%s\n", line); /* another run's record */
        }
    }
    for (int i = 0; i < n_own; i++) {
        int newer = 0;
        for (int j = 0; j < n_own; j++)
            newer += own[j] > own[i];
        run_dir_checkpoint_name(ckpt, sizeof ckpt, d->path, own[i]);
        if (prune && newer >= keep_last && own[i] != step)
            unlink(ckpt);
        else
            len += (size_t)snprintf(text + len, cap - len, "%s\tckpt-%07ld.h5\n", d->run_id, own[i]);
    }
    write_file(path, text, len);
    free(text);
    free(own);
    free(old);
}

void run_dir_save_checkpoint(const RunDir *d, long step, int keep_last, const Model *m, CheckpointExtras extras) {
    char path[CONFIG_PATH_MAX + 32];
    run_dir_checkpoint_name(path, sizeof path, d->path, step);
    extras.run_id = d->run_id;
    checkpoint_save(path, m, &extras);
    char latest[CONFIG_PATH_MAX + 32], text[128];
    snprintf(latest, sizeof latest, "%s/latest", d->path);
    int len = snprintf(text, sizeof text, "ckpt-%07ld.h5\nrun %s\n", step, d->run_id);
    /* lineage first (a kill before latest leaves the new checkpoint recorded, so pruned later),
     * then latest, then the pruning: latest always names a checkpoint that exists */
    record_lineage(d, step, keep_last, 0);
    write_file(latest, text, (size_t)len); /* temp + rename; a failure removes the temp file */
    record_lineage(d, step, keep_last, 1);
    rp_log("checkpoint %s", path);
}

int run_dir_latest(const char *run_dir, char *out, size_t size) { return checkpoint_latest(run_dir, out, size); }

int run_dir_latest_id(const char *run_dir, char *out, size_t size) {
    char latest[CONFIG_PATH_MAX + 32], line[256];
    snprintf(latest, sizeof latest, "%s/latest", run_dir);
    FILE *f = open_regular_file(latest, "the run's latest checkpoint record", 1); /* NULL: none yet */
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char id[RUN_ID_HEX + 8];
        found = sscanf(line, "run %39s", id) == 1 && run_id_valid(id) && strlen(id) < size;
        if (found)
            snprintf(out, size, "%s", id);
    }
    fclose(f);
    return found;
}

static int ascending(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int run_dir_lineage(const char *run_dir, const char *what, long **steps) {
    char id[RUN_ID_HEX + 1], path[CONFIG_PATH_MAX + 32], ckpt[CONFIG_PATH_MAX + 32];
    RP_CHECK(run_dir_latest_id(run_dir, id, sizeof id),
             "%s %s: %s/latest records no run id (not a run directory, or one of an older realpos): name "
             "the checkpoints instead", what, run_dir, run_dir);
    lineage_path(path, sizeof path, run_dir);
    RP_CHECK(access(path, F_OK) == 0,
             "%s %s: %s is missing: the run's record of its checkpoints (a run directory of an older "
             "realpos has none): name the checkpoints instead", what, run_dir, path);
    size_t len;
    char *text = read_file(path, &len, "the run's checkpoint lineage");
    int count = 0, cap = 16;
    *steps = xmalloc(sizeof(long) * (size_t)cap);
    for (char *line = text, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        char line_id[64], name[64];
        long step;
        if (!lineage_line(line, line_id, name, &step) || strcmp(line_id, id))
            continue; /* another run's record */
        run_dir_checkpoint_name(ckpt, sizeof ckpt, run_dir, step);
        RP_CHECK(access(ckpt, F_OK) == 0,
                 "%s %s: %s names %s of run %s (the run's latest), but %s does not exist (removed by hand?): "
                 "name the checkpoints instead", what, run_dir, path, name, id, ckpt);
        if (count == cap)
            *steps = realloc(*steps, sizeof(long) * (size_t)(cap *= 2));
        RP_CHECK(*steps, "out of memory reading %s", path);
        (*steps)[count++] = step;
    }
    free(text);
    RP_CHECK(count > 0, "%s %s: %s records no checkpoint of run %s (the run's latest)", what, run_dir, path, id);
    qsort(*steps, (size_t)count, sizeof **steps, ascending);
    return count;
}

void run_dir_resolve_checkpoint(const char *arg, char *out, size_t size) {
    checkpoint_resolve(arg, "--resume", out, size);
}
