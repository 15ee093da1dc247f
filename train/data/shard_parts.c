/* The record of a shard set's prepare in progress: the N of its `--part I/N` processes
 * (shard_set.h), kept in shard_dir/prepare-parts.txt until the index is written. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/common.h"
#include "train/data/shard_set.h"

static const char *partition(char *out, size_t size, long n) {
    if (n == 1)
        snprintf(out, size, "one whole prepare (N = 1)");
    else
        snprintf(out, size, "%ld parts (--part I/%ld)", n, n);
    return out;
}

int shard_set_claim_parts(const char *dir, int num_parts) {
    char path[CONFIG_PATH_MAX + 32], tmp[CONFIG_PATH_MAX + 64], text[16];
    snprintf(path, sizeof path, "%s/%s", dir, SHARD_SET_PARTS);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    write_file(tmp, text, (size_t)snprintf(text, sizeof text, "%d\n", num_parts));
    int linked = link(tmp, path) == 0, err = errno; /* link(2) fails if the record exists */
    unlink(tmp);
    if (linked) {
        sync_directory(path);
        return num_parts;
    }
    RP_CHECK(err == EEXIST, "%s: cannot create: %s", path, strerror(err));
    size_t len;
    char *recorded = read_file(path, &len, "the shard set's partition (prepare)");
    char *end;
    long was = strtol(recorded, &end, 10);
    RP_CHECK(end != recorded && *end == '\n' && was >= 1 && was <= INT_MAX,
             "%s: expected the N of the prepare in progress (a positive number and a newline), got "
             "'%.*s'", path, (int)(len < 32 ? len : 32), recorded);
    free(recorded);
    return (int)was;
}

void shard_set_refuse_parts(const char *dir, int was, int num_parts) {
    char path[CONFIG_PATH_MAX + 32], before[64], now[64], finish[96];
    snprintf(path, sizeof path, "%s/%s", dir, SHARD_SET_PARTS);
    if (was == 1)
        snprintf(finish, sizeof finish, "finish it with a whole `realpos prepare`");
    else
        snprintf(finish, sizeof finish, "run the remaining parts with --part I/%d (a lost part again "
                 "with its own I)", was);
    RP_FATAL("[data] shard_dir %s is being prepared by %s (recorded in %s), this prepare is %s: "
             "two partitions of the corpus would mix in one shard set; %s, or, if no prepare of that "
             "set is running any more, remove %s to start over with N = %d",
             dir, partition(before, sizeof before, was), path, partition(now, sizeof now, num_parts),
             finish, path, num_parts);
}

void shard_set_release_parts(const char *dir) {
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, SHARD_SET_PARTS);
    RP_CHECK(unlink(path) == 0 || errno == ENOENT, "%s: cannot remove: %s", path, strerror(errno));
    sync_directory(path);
}
