/* The writer's side of a shard set being prepared (shard_parts.h): the record of the prepare in
 * progress (shard_dir/prepare-parts.txt: its N and its settings) and the lock under which whoever
 * finds every source done writes the index. */
#include "train/data/shard_parts.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/atomic_file.h"
#include "core/io/files.h"
#include "train/data/shard.h"
#include "train/data/shard_settings.h"
#include "train/data/shard_temp.h"
#include "train/data/shard_write.h"

static const char *partition(char *out, size_t size, long n) {
    if (n == 1)
        snprintf(out, size, "one whole prepare (N = 1)");
    else
        snprintf(out, size, "%ld parts (--part I/%ld)", n, n);
    return out;
}

/* The record: "N\n" then the settings as one line of JSON (an older realpos wrote "N\n" alone). */
static char *record_text(const SetSettings *s, int num_parts) {
    cJSON *settings = shard_settings_record(s->data, s->vocab_md5);
    char *json = cJSON_PrintUnformatted(settings);
    cJSON_Delete(settings);
    RP_CHECK(json, "out of memory recording the prepare's settings");
    size_t size = strlen(json) + 32;
    char *text = xmalloc(size);
    snprintf(text, size, "%d\n%s\n", num_parts, json);
    cJSON_free(json);
    return text;
}

/* Write the record to a temporary, then link(2) it to path (install = 0: fails with EEXIST if a
 * record exists) or rename(2) it over path (install = 1). Returns 0 or the errno of link/rename;
 * the temporary is gone either way. */
static int put_record(const SetSettings *s, int num_parts, const char *path, int install) {
    char tmp[CONFIG_PATH_MAX + 256];
    shard_temp_begin(tmp, sizeof tmp, path);
    char *text = record_text(s, num_parts);
    write_file(tmp, text, strlen(text));
    free(text);
    int rc = install ? rename(tmp, path) : link(tmp, path), err = rc == 0 ? 0 : errno;
    if (!install || rc != 0)
        unlink(tmp);
    shard_temp_end();
    if (!err)
        sync_directory(path);
    return err;
}

int shard_parts_claim(const SetSettings *s, int num_parts) {
    const char *dir = s->data->shard_dir;
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, SHARD_SET_PARTS);
    int err = put_record(s, num_parts, path, 0);
    if (!err)
        return num_parts;
    RP_CHECK(err == EEXIST, "%s: cannot create: %s", path, strerror(err));
    size_t len;
    char *recorded = read_file(path, &len, "the shard set's partition (prepare)");
    char *end;
    long was = strtol(recorded, &end, 10);
    RP_CHECK(end != recorded && *end == '\n' && was >= 1 && was <= INT_MAX,
             "%s: expected the N of the prepare in progress (a positive number and a newline), got "
             "'%.*s'", path, (int)(len < 32 ? len : 32), recorded);
    cJSON *settings = end[1] ? cJSON_Parse(end + 1) : NULL;
    RP_CHECK(!end[1] || cJSON_IsObject(settings),
             "%s: the line after the N is not the prepare's settings (a JSON object): remove the file "
             "if no prepare of %s is running", path, dir);
    free(recorded);
    char differences[4096] = "";
    int n = settings ? shard_settings_differences(s->data, s->vocab_md5, settings, "the prepare in progress",
                                                  differences, sizeof differences)
                     : 0;
    cJSON_Delete(settings);
    if (n && was == 1 && num_parts == 1) { /* a whole prepare that stopped; this one starts over */
        err = put_record(s, num_parts, path, 1);
        RP_CHECK(!err, "%s: cannot replace: %s", path, strerror(err));
        return num_parts;
    }
    RP_CHECK(n == 0,
             "[data] shard_dir %s is being prepared (recorded in %s) with other settings than this "
             "prepare's:%s\nevery part of a set must be prepared with the same settings (the parts "
             "would make shards of different sets, and none would write the index): start this part "
             "with the settings of the others, or, if no prepare of that set is running any more, "
             "remove %s to start over",
             dir, path, differences, path);
    return (int)was;
}

void shard_parts_refuse(const char *dir, int was, int num_parts) {
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

void shard_parts_drop_index(const char *dir) {
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, SHARD_SET_INDEX);
    if (unlink(path) == 0) {
        sync_directory(path);
        rp_log("prepare: removed %s: the set changes; the index is written again when every source is done",
               path);
    } else {
        RP_CHECK(errno == ENOENT, "%s: cannot remove: %s", path, strerror(errno));
    }
}

/* Every source is done: forget the partition (called before the index is written, so that a kill
 * in between leaves a set any prepare completes). */
static void shard_parts_release(const char *dir) {
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, SHARD_SET_PARTS);
    RP_CHECK(unlink(path) == 0 || errno == ENOENT, "%s: cannot remove: %s", path, strerror(errno));
    sync_directory(path);
}

int shard_parts_finish(const SetSettings *s, const CorpusList *list) {
    const char *dir = s->data->shard_dir;
    char lock_path[CONFIG_PATH_MAX + 32], parts[CONFIG_PATH_MAX + 32], index[CONFIG_PATH_MAX + 32];
    snprintf(lock_path, sizeof lock_path, "%s/.lock-index", dir);
    snprintf(parts, sizeof parts, "%s/%s", dir, SHARD_SET_PARTS);
    snprintf(index, sizeof index, "%s/%s", dir, SHARD_SET_INDEX);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    RP_CHECK(fd >= 0, "%s: cannot open the lock under which the index is written: %s", lock_path,
             strerror(errno));
    int rc;
    while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    RP_CHECK(rc == 0, "%s: cannot lock: %s", lock_path, strerror(errno));
    /* Each process writes its manifests before it takes this lock and looks at all of them after:
     * the last one to take it sees every source done, whatever the order the parts ran in. */
    int done = 1;
    for (int i = 0; i < list->count && done; i++) {
        char stem[18];
        ShardCounts ignored = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
        shard_settings_source_stem(stem, s, list->files[i].path);
        done = shard_write_manifest_done(s, &list->files[i], stem, 0, &ignored);
    }
    int written = 0;
    if (done && access(parts, F_OK) != 0 && access(index, F_OK) == 0) {
        written = 1; /* another part, done after this one's last manifest, wrote it */
    } else if (done) {
        shard_parts_release(dir);
        shard_write_index(s, list);
        written = 1;
    }
    close(fd); /* releases the lock */
    return written;
}
