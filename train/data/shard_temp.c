/* Shard temporaries (shard_temp.h): PATH.tmp.PID.HOST names, their removal when a signal ends a
 * prepare, and the removal of those of dead processes. */
#include "train/data/shard_temp.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "train/config/config.h"

/* The temporary being written, for the signal handler: the only state a handler may touch, hence
 * file scope. Set before the file exists and cleared after its rename, so at worst the handler
 * unlinks a name that is not there. */
static char live_temp[CONFIG_PATH_MAX + 384];
static volatile sig_atomic_t live_temp_set = 0;

static void on_signal(int sig) {
    if (live_temp_set)
        unlink(live_temp);
    raise(sig); /* SA_RESETHAND: the default action now, so the exit status names the signal */
}

void shard_temp_cleanup_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
        sigaction(signals[i], &sa, NULL);
}

/* This host's name with characters outside [A-Za-z0-9-] as '_' (it is part of a file name). */
static void host_name(char *out, size_t size) {
    if (gethostname(out, size) != 0)
        snprintf(out, size, "unknown");
    out[size - 1] = '\0';
    for (char *c = out; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
            *c = '_';
}

void shard_temp_begin(char *tmp, size_t size, const char *path) {
    char host[128];
    host_name(host, sizeof host);
    int n = snprintf(tmp, size, "%s.tmp.%ld.%s", path, (long)getpid(), host);
    RP_CHECK(n > 0 && (size_t)n < size && (size_t)n < sizeof live_temp, "%s: path too long", path);
    live_temp_set = 0;
    memcpy(live_temp, tmp, (size_t)n + 1);
    live_temp_set = 1;
}

void shard_temp_end(void) { live_temp_set = 0; }

void shard_temp_remove_stale(const char *dir, int whole) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    char host[128];
    host_name(host, sizeof host);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *tail = strstr(e->d_name, ".tmp.");
        if (!tail)
            continue;
        char *end;
        long pid = strtol(tail + 5, &end, 10);
        /* "NAME.tmp.PID.HOST": a shard of a process on this host; "NAME.tmp.PID": an older
         * realpos's or a record's, judged only by a whole prepare (no part elsewhere runs) */
        int here = *end == '.' && !strcmp(end + 1, host), old = *end == '\0' && whole;
        if (pid <= 0 || (!here && !old) || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[CONFIG_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0)
            rp_log("prepare: removed %s, left by a prepare that was killed (process %ld is gone)", path, pid);
    }
    closedir(d);
}
