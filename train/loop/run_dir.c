/* Run directory: config, rotating checkpoints, `latest`, stop signals (run_dir.h). */
#include "train/loop/run_dir.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "train/config/config.h"

/* Set by the SIGINT/SIGTERM handler, polled between steps: the only state a signal handler may
 * touch, hence file scope. */
static volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) { stop_signal = sig; }

void stop_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL); /* what mpirun forwards to every rank (SIGTERM it turns into a kill) */
}

int stop_signal_received(void) { return (int)stop_signal; }

void run_dir_open(const char *run_dir, const char *config_ini) {
    mkdir_p(run_dir);
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.ini", run_dir);
    FILE *f = fopen(path, "w");
    RP_CHECK(f, "%s: cannot write", path);
    fputs(config_ini, f);
    fclose(f);
}

void run_dir_checkpoint_name(char *out, size_t size, const char *run_dir, long step) {
    snprintf(out, size, "%s/ckpt-%07ld.h5", run_dir, step);
}

/* Delete all but the newest keep_last checkpoints of the run directory. */
static void prune_checkpoints(const char *run_dir, int keep_last) {
    DIR *dir = opendir(run_dir);
    if (!dir)
        return;
    long steps[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < 4096) {
        long s;
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%ld.%3s", &s, tail) == 2 && !strcmp(tail, "h5") && strlen(e->d_name) == 15)
            steps[n++] = s;
    }
    closedir(dir);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i];
        if (newer >= keep_last) {
            char path[CONFIG_PATH_MAX + 32];
            run_dir_checkpoint_name(path, sizeof path, run_dir, steps[i]);
            unlink(path);
        }
    }
}

void run_dir_save_checkpoint(const char *run_dir, long step, int keep_last, const Model *m,
                             const CheckpointExtras *extras) {
    char path[CONFIG_PATH_MAX + 32];
    run_dir_checkpoint_name(path, sizeof path, run_dir, step);
    checkpoint_save(path, m, extras);
    char latest[CONFIG_PATH_MAX + 32], name[64];
    snprintf(latest, sizeof latest, "%s/latest", run_dir);
    int len = snprintf(name, sizeof name, "ckpt-%07ld.h5\n", step);
    write_file(latest, name, (size_t)len); /* temp + rename; a failure removes the temp file */
    prune_checkpoints(run_dir, keep_last);
    rp_log("checkpoint %s", path);
}
