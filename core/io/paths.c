/* Path checks: regular files, and the read/write plan of a command (paths.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/io/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"

/* "a FIFO (named pipe)", "a directory", ... for messages. */
static const char *file_kind(mode_t mode) {
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* /dev/null reads as an empty file (`realpos finetune /dev/null --set ...`: the defaults). */
static bool is_dev_null(const struct stat *st) {
    struct stat null;
    return S_ISCHR(st->st_mode) && stat("/dev/null", &null) == 0 && st->st_rdev == null.st_rdev;
}

const char *path_error_text(int error) {
    if (error == ELOOP)
        return "a symbolic link loop (ELOOP: too many levels of symbolic links)";
    return strerror(error);
}

static void require_kind(const char *path, const char *what, bool directory) {
    RP_CHECK(path && path[0], "%s: expected a path, got an empty string", what);
    struct stat st;
    RP_CHECK(stat(path, &st) == 0, "%s: cannot open %s: %s", path, what, path_error_text(errno));
    bool ok = directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) || is_dev_null(&st);
    RP_CHECK(ok, "%s: %s is %s, expected %s", path, what, file_kind(st.st_mode),
             directory ? "a directory" : "a regular file");
}

void require_regular_file(const char *path, const char *what) { require_kind(path, what, false); }

FILE *open_regular_file(const char *path, const char *what, int missing_ok) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && missing_ok)
        return NULL;
    RP_CHECK(fd >= 0, "%s: cannot open %s: %s", path, what, path_error_text(errno));
    struct stat st;
    RP_CHECK(fstat(fd, &st) == 0, "%s: cannot stat %s: %s", path, what, strerror(errno));
    if (!S_ISREG(st.st_mode) && !is_dev_null(&st)) {
        close(fd);
        RP_FATAL("%s: %s is %s, expected a regular file", path, what, file_kind(st.st_mode));
    }
    RP_CHECK(fcntl(fd, F_SETFL, 0) == 0, "%s: %s: %s", path, what, strerror(errno)); /* blocking reads again */
    FILE *f = fdopen(fd, "r");
    RP_CHECK(f, "%s: cannot open %s: %s", path, what, strerror(errno));
    return f;
}
void require_directory(const char *path, const char *what) { require_kind(path, what, true); }

void io_plan_init(IoPlan *plan) { plan->count = 0; }

static void add(IoPlan *plan, const char *path, const char *what, IoKind kind) {
    RP_CHECK(plan->count < IO_PLAN_MAX, "more than %d paths to check (at %s '%s')", IO_PLAN_MAX, what, path);
    plan->entries[plan->count++] = (IoEntry){path, what, kind};
}

void io_plan_input(IoPlan *plan, const char *path, const char *what) { add(plan, path, what, IO_INPUT); }
void io_plan_input_dir(IoPlan *plan, const char *path, const char *what) { add(plan, path, what, IO_INPUT_DIR); }
void io_plan_output(IoPlan *plan, const char *path, const char *what) { add(plan, path, what, IO_OUTPUT); }
void io_plan_output_dir(IoPlan *plan, const char *path, const char *what) { add(plan, path, what, IO_OUTPUT_DIR); }

/* Identity of one path: device + inode when it exists; the canonical absolute path always (the
 * realpath of its deepest existing ancestor + the remaining components). */
typedef struct {
    bool exists;
    dev_t dev;
    ino_t ino;
    char real[PATH_MAX];
    int missing_components; /* components below the deepest existing ancestor */
    char ancestor[PATH_MAX];  /* that ancestor, as realpath gives it */
} PathId;

/* Append component (length n) to the canonical path in out, resolving "." and ".." lexically
 * (the components below an existing ancestor do not exist, so they are not links). */
static void append_component(char *out, const char *component, size_t n, const char *path) {
    if (n == 0 || (n == 1 && component[0] == '.'))
        return;
    if (n == 2 && !strncmp(component, "..", 2)) {
        char *slash = strrchr(out, '/');
        if (slash)
            slash == out ? (void)(out[1] = '\0') : (void)(*slash = '\0');
        return;
    }
    size_t used = strlen(out);
    RP_CHECK(used + n + 2 < PATH_MAX, "%s: path too long", path);
    if (used && out[used - 1] != '/')
        out[used++] = '/';
    memcpy(out + used, component, n);
    out[used + n] = '\0';
}

static void identify(const IoEntry *e, PathId *id) {
    RP_CHECK(e->path && e->path[0], "%s: expected a path, got an empty string", e->what);
    size_t length = strlen(e->path);
    RP_CHECK(length < PATH_MAX, "%s: path of %zu bytes is too long", e->what, length);
    memset(id, 0, sizeof *id);
    struct stat st;
    if (stat(e->path, &st) == 0) {
        id->exists = true;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
    } else {
        RP_CHECK(errno == ENOENT, "%s: cannot use %s: %s", e->path, e->what, strerror(errno));
    }
    /* split into the deepest existing ancestor (head) and the missing components (tail) */
    char head[PATH_MAX];
    memcpy(head, e->path, length + 1);
    size_t tail_start = length; /* e->path[tail_start..] are the missing components */
    while (!realpath(head, id->ancestor)) {
        RP_CHECK(errno == ENOENT, "%s: cannot use %s: %s", e->path, e->what, strerror(errno));
        size_t n = strlen(head);
        while (n > 1 && head[n - 1] == '/')
            head[--n] = '\0';
        char *slash = strrchr(head, '/');
        tail_start = slash ? (size_t)(slash + 1 - head) : 0;
        id->missing_components++;
        if (!slash)
            strcpy(head, ".");
        else if (slash == head)
            head[1] = '\0';
        else
            *slash = '\0';
    }
    snprintf(id->real, sizeof id->real, "%s", id->ancestor);
    for (const char *c = e->path + (id->missing_components ? tail_start : length); *c;) {
        size_t n = strcspn(c, "/");
        append_component(id->real, c, n, e->path);
        c += n + (c[n] == '/');
    }
}

static bool same_path(const PathId *a, const PathId *b) {
    if (a->exists && b->exists)
        return a->dev == b->dev && a->ino == b->ino;
    return !strcmp(a->real, b->real);
}

/* inner lies strictly inside the directory outer */
static bool inside(const PathId *inner, const PathId *outer) {
    size_t n = strlen(outer->real);
    if (n == 1) /* "/" */
        return inner->real[1] != '\0';
    return !strncmp(inner->real, outer->real, n) && inner->real[n] == '/';
}

static bool is_input(IoKind kind) { return kind == IO_INPUT || kind == IO_INPUT_DIR; }

/* Rule 1 and the output conditions of paths.h for one entry. */
static void check_entry(const IoEntry *e, const PathId *id) {
    if (is_input(e->kind)) {
        require_kind(e->path, e->what, e->kind == IO_INPUT_DIR);
        return;
    }
    bool directory = e->kind == IO_OUTPUT_DIR;
    if (id->exists) {
        struct stat st;
        RP_CHECK(stat(e->path, &st) == 0, "%s: cannot use %s: %s", e->path, e->what, strerror(errno));
        RP_CHECK(directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode),
                 "%s: %s is %s, expected %s", e->path, e->what, file_kind(st.st_mode),
                 directory ? "a directory (or a path that does not exist yet)"
                           : "a regular file (or a path that does not exist yet)");
    }
    /* where the output is created: the folder itself if it exists, else its parent (a folder's
     * missing ancestors are made by mkdir -p: then the deepest existing one) */
    char parent[PATH_MAX];
    if (directory)
        snprintf(parent, sizeof parent, "%s", id->exists ? id->real : id->ancestor);
    else
        path_directory(parent, sizeof parent, id->real);
    RP_CHECK(directory || id->missing_components <= 1,
             "%s: cannot write %s: the directory '%s' does not exist (No such file or directory)", e->path, e->what,
             parent);
    struct stat st;
    RP_CHECK(stat(parent, &st) == 0 && S_ISDIR(st.st_mode), "%s: cannot write %s: '%s' is not a directory", e->path,
             e->what, parent);
    RP_CHECK(access(parent, W_OK | X_OK) == 0, "%s: cannot write %s in '%s': %s", e->path, e->what, parent,
             strerror(errno));
}

void io_plan_check(const IoPlan *plan) {
    PathId *ids = xmalloc(sizeof(PathId) * (size_t)(plan->count ? plan->count : 1));
    for (int i = 0; i < plan->count; i++) {
        identify(&plan->entries[i], &ids[i]);
        check_entry(&plan->entries[i], &ids[i]);
    }
    for (int o = 0; o < plan->count; o++) {
        const IoEntry *out = &plan->entries[o];
        if (is_input(out->kind))
            continue;
        for (int i = 0; i < plan->count; i++) {
            const IoEntry *other = &plan->entries[i];
            if (i == o || (!is_input(other->kind) && i > o))
                continue; /* each pair of outputs once */
            bool input = is_input(other->kind);
            RP_CHECK(!same_path(&ids[o], &ids[i]),
                     input ? "%s '%s' and %s '%s' are the same file; writing it would destroy the input: choose "
                             "another %s"
                           : "%s '%s' and %s '%s' are the same path; the second write would destroy the first: "
                             "choose another %s",
                     other->what, other->path, out->what, out->path, out->what);
            RP_CHECK(!(other->kind == IO_INPUT_DIR && inside(&ids[o], &ids[i])),
                     "%s '%s' lies inside %s '%s', a folder this command reads as a whole: choose another %s "
                     "outside it", out->what, out->path, other->what, other->path, out->what);
            RP_CHECK(!(input && out->kind == IO_OUTPUT_DIR && inside(&ids[i], &ids[o])),
                     "%s '%s' lies inside %s '%s', which this command writes: the input could be overwritten; "
                     "move it or choose another %s", other->what, other->path, out->what, out->path, out->what);
        }
    }
    free(ids);
}

void require_distinct_files(const char *input, const char *input_what, const char *output, const char *output_what) {
    struct stat st;
    if (!input || !input[0] || !output || !output[0] || stat(input, &st) != 0)
        return;
    IoEntry in = {input, input_what, IO_INPUT}, out = {output, output_what, IO_OUTPUT};
    PathId in_id, out_id;
    identify(&in, &in_id);
    identify(&out, &out_id);
    RP_CHECK(!same_path(&in_id, &out_id), "%s '%s' and %s '%s' are the same file; writing it would destroy the "
             "input: choose another %s", input_what, input, output_what, output, output_what);
}

void path_directory(char *out, size_t size, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, size, ".");
    else if (slash == path)
        snprintf(out, size, "/");
    else
        snprintf(out, size, "%.*s", (int)(slash - path), path);
}
