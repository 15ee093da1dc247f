/* The data a checkpoint was trained on (data_identity.h). */
#include "train/loop/data_identity.h"

#include <string.h>

#include "core/common.h"
#include "core/io/h5io.h"

#define DATA_IDENTITY "train/data_identity"

void data_identity_write(hid_t file, const char *identity) {
    if (identity)
        h5_write_string(file, DATA_IDENTITY, identity);
}

/* Does text hold line (n bytes) as one of its lines? */
static int has_line(const char *text, const char *line, size_t n) {
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        if (len == n && !memcmp(p, line, n))
            return 1;
        p += len + (p[len] == '\n');
    }
    return 0;
}

/* Append to out the lines of a missing from b, each prefixed with `label`. */
static size_t lines_missing(const char *a, const char *b, const char *label, char *out, size_t size, size_t len) {
    for (const char *p = a; *p && len + 1 < size;) {
        size_t n = strcspn(p, "\n");
        if (!has_line(b, p, n)) {
            int w = snprintf(out + len, size - len, "\n  %s %.*s", label, (int)n, p);
            len = w > 0 && (size_t)w < size - len ? len + (size_t)w : size - 1;
        }
        p += n + (p[n] == '\n');
    }
    return len;
}

void data_identity_check(hid_t file, const char *path, const char *identity) {
    if (!identity)
        return;
    if (!h5_exists(file, DATA_IDENTITY)) {
        rp_log("note: %s does not record the data it was trained on (written by an older realpos): the "
               "resumed run cannot check that its data is the same", path);
        return;
    }
    char *stored = h5_read_string(file, path, DATA_IDENTITY);
    if (!strcmp(stored, identity)) {
        free(stored);
        return;
    }
    char changed[8192] = "";
    size_t len = lines_missing(stored, identity, "checkpoint:", changed, sizeof changed, 0);
    lines_missing(identity, stored, "now:       ", changed, sizeof changed, len);
    free(stored);
    RP_FATAL("--resume %s: the training data changed since the checkpoint was written:%s\na resumed run "
             "continues from its position in the data it was trained on, which means nothing in other "
             "data: restore that data (or its shard set), or start a fresh run in another train.run_dir", path, changed);
}
