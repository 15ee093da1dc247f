/* The temporaries a prepare writes (a shard, the record of a prepare in progress) as
 * PATH.tmp.PID.HOST, removed if a signal ends the prepare, and those of processes that died. */
#pragma once
#include <stddef.h>

/* tmp = PATH.tmp.PID.HOST, the temporary a shard is written to (remembered until shard_temp_end,
 * so that shard_temp_cleanup_on_signals' handler removes it if a signal ends the prepare). */
void shard_temp_begin(char *tmp, size_t size, const char *path);
void shard_temp_end(void);
/* SIGINT, SIGTERM, SIGHUP, SIGQUIT remove the shard temporary being written, then end the process
 * as the signal would have. (SIGKILL cannot be caught: shard_temp_remove_stale.) */
void shard_temp_cleanup_on_signals(void);
/* Remove dir's shard temporaries of processes of this host that are gone (and, with whole, the
 * PATH.tmp.PID temporaries without a host of dead processes: only a whole prepare may, since a
 * part on another host sharing dir cannot be judged from here). */
void shard_temp_remove_stale(const char *dir, int whole);
