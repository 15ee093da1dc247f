/* core/io/paths: require_regular_file on every kind of non-file, and the rules of io_plan_check
 * (paths.h) by identity, not spelling: links, "./", "..", paths that do not exist yet, folders.
 * Each case runs in a child process (the checks are fatal); the child's exit status and stderr
 * are the verdict. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/io/paths.h"
#include "tests/check.h"

static char root[256];

/* Path under the scratch directory (static ring of buffers: several per expression). */
static const char *at(const char *name) {
    static char ring[16][512];
    static int next;
    char *p = ring[next++ % 16];
    snprintf(p, 512, "%s/%s", root, name);
    return p;
}

typedef struct {
    IoKind kind;
    const char *path, *what;
} Item;

/* Run the plan of items (or require_regular_file of items[0] when `regular`) in a child; returns
 * its exit status, stderr in err. */
static int run(const Item *items, int n, int regular, char *err, size_t size) {
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        if (regular) {
            require_regular_file(items[0].path, items[0].what);
            _exit(0);
        }
        IoPlan plan;
        io_plan_init(&plan);
        void (*add[])(IoPlan *, const char *, const char *) = {io_plan_input, io_plan_input_dir, io_plan_output,
                                                              io_plan_output_dir};
        for (int i = 0; i < n; i++)
            add[items[i].kind](&plan, items[i].path, items[i].what);
        io_plan_check(&plan);
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t got;
    while (used + 1 < size && (got = read(fds[0], err + used, size - used - 1)) > 0)
        used += (size_t)got;
    err[used] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void expect(TestTally *t, const char *name, const Item *items, int n, int regular, const char *pattern) {
    char err[2048];
    int rc = run(items, n, regular, err, sizeof err);
    int ok = pattern ? rc == 1 && strstr(err, pattern) != NULL : rc == 0;
    for (char *c = err; *c; c++)
        *c = *c == '\n' ? ' ' : *c;
    CHECK(t, ok, "%s (status %d%s%s)", name, rc, err[0] ? ": " : "", err);
}

static void touch(const char *path) { close(open(path, O_CREAT | O_WRONLY, 0644)); }

int main(void) {
    TestTally t = {0, 0};
    snprintf(root, sizeof root, "/tmp/realpos-paths.XXXXXX");
    if (!mkdtemp(root))
        return 1;
    touch(at("in.txt"));
    mkdir(at("dir"), 0755);
    mkdir(at("dir/sub"), 0755);
    touch(at("dir/a.json"));
    mkfifo(at("fifo"), 0644);
    symlink(at("in.txt"), at("link"));
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", at("sock"));
    bind(sock, (struct sockaddr *)&addr, sizeof addr);

    /* require_regular_file: every kind of non-file is named with its role */
    Item one[1];
    one[0] = (Item){IO_INPUT, at("in.txt"), "config"};
    expect(&t, "a regular file is accepted", one, 1, 1, NULL);
    one[0] = (Item){IO_INPUT, at("link"), "config"};
    expect(&t, "a link to a regular file is accepted", one, 1, 1, NULL);
    one[0] = (Item){IO_INPUT, at("fifo"), "config"};
    expect(&t, "a FIFO is refused, not opened (which would block)", one, 1, 1, "fifo: config is a FIFO (named pipe)");
    one[0] = (Item){IO_INPUT, at("dir"), "key 'task.init_checkpoint'"};
    expect(&t, "a directory is refused naming the key", one, 1, 1,
           "dir: key 'task.init_checkpoint' is a directory, expected a regular file");
    one[0] = (Item){IO_INPUT, "/dev/zero", "vocabulary"};
    expect(&t, "a device is refused", one, 1, 1, "/dev/zero: vocabulary is a character device");
    one[0] = (Item){IO_INPUT, "/dev/null", "config"};
    expect(&t, "control: /dev/null reads as an empty file", one, 1, 1, NULL);
    Item null_out[] = {{IO_OUTPUT, "/dev/null", "--out"}};
    expect(&t, "... but is no output (temp + rename would replace it)", null_out, 1, 0, "--out is a character device");
    one[0] = (Item){IO_INPUT, at("sock"), "corpus"};
    expect(&t, "a socket is refused", one, 1, 1, "sock: corpus is a socket");
    one[0] = (Item){IO_INPUT, at("missing"), "config file"};
    expect(&t, "a missing file names the reason", one, 1, 1, "missing: cannot open config file: No such file");
    one[0] = (Item){IO_INPUT, "", "--input"};
    expect(&t, "an empty path is refused", one, 1, 1, "--input: expected a path, got an empty string");

    /* rule 2: an output is never an input, however spelled */
    Item same[] = {{IO_INPUT, at("in.txt"), "--input"}, {IO_OUTPUT, at("./in.txt"), "--out"}};
    expect(&t, "output = input through ./", same, 2, 0, "are the same file");
    same[1].path = at("link");
    expect(&t, "output = input through a symlink", same, 2, 0, "are the same file");
    same[1].path = at("dir/../in.txt");
    expect(&t, "output = input through ..", same, 2, 0, "in.txt' are the same file");
    same[1].path = at("out.txt");
    expect(&t, "control: a new output beside the input", same, 2, 0, NULL);

    /* rule 3: outputs are distinct, also before they exist */
    Item outs[] = {{IO_INPUT, at("in.txt"), "--input"}, {IO_OUTPUT, at("new.h5"), "--out"},
                   {IO_OUTPUT, at("dir/../new.h5"), "--config-out"}};
    expect(&t, "two outputs that will be one new file", outs, 3, 0,
           "--out '");
    expect(&t, "... named as such", outs, 3, 0, "are the same path; the second write would destroy the first");
    outs[2].path = at("new.ini");
    expect(&t, "control: two distinct new outputs", outs, 3, 0, NULL);

    /* rule 4: no output inside a folder read as a whole */
    Item in_dir[] = {{IO_INPUT_DIR, at("dir"), "the HF folder"}, {IO_OUTPUT, at("dir/sub/x.h5"), "--out"}};
    expect(&t, "output inside an input folder", in_dir, 2, 0, "lies inside the HF folder");
    in_dir[1].path = at("x.h5");
    expect(&t, "control: output beside the input folder", in_dir, 2, 0, NULL);
    Item dir_file[] = {{IO_INPUT, at("dir/a.json"), "config.json"}, {IO_OUTPUT, at("dir/model.h5"), "--out"}};
    expect(&t, "control: a new output in the folder of a registered input file", dir_file, 2, 0, NULL);

    /* rule 5: no input inside an output folder */
    Item out_dir[] = {{IO_INPUT, at("dir/a.json"), "--init"}, {IO_OUTPUT_DIR, at("dir"), "train.run_dir"}};
    expect(&t, "input inside an output folder", out_dir, 2, 0, "--init '");
    expect(&t, "... named as such", out_dir, 2, 0, "lies inside train.run_dir");
    out_dir[1].path = at("dir/sub/deeper/run");
    expect(&t, "control: an output folder of missing ancestors (made by mkdir -p)", out_dir, 2, 0, NULL);
    Item dir_eq[] = {{IO_INPUT_DIR, at("dir"), "DIR"}, {IO_OUTPUT_DIR, at("dir/sub/.."), "--out"}};
    expect(&t, "output folder = input folder", dir_eq, 2, 0, "are the same file");

    /* outputs: kind and parent directory */
    Item bad_out[] = {{IO_OUTPUT, at("dir"), "--out"}};
    expect(&t, "an output file that is a directory", bad_out, 1, 0, "dir: --out is a directory, expected a regular file");
    bad_out[0].path = at("fifo");
    expect(&t, "an output file that is a FIFO", bad_out, 1, 0, "--out is a FIFO");
    bad_out[0].path = at("no/such/dir/x.h5");
    expect(&t, "an output in a missing directory", bad_out, 1, 0, "No such file or directory");
    bad_out[0] = (Item){IO_OUTPUT_DIR, at("in.txt"), "--out"};
    expect(&t, "an output folder that is a file", bad_out, 1, 0, "--out is a regular file, expected a directory");
    bad_out[0] = (Item){IO_OUTPUT, at("in.txt/x"), "--out"};
    expect(&t, "an output below a file", bad_out, 1, 0, "Not a directory");
    bad_out[0] = (Item){IO_OUTPUT, "", "--out"};
    expect(&t, "an empty output path", bad_out, 1, 0, "--out: expected a path, got an empty string");
    if (geteuid() != 0) { /* root writes anywhere: the read-only case is tests/train/cli/test_inputs.sh's tmpfs */
        chmod(at("dir/sub"), 0555);
        bad_out[0] = (Item){IO_OUTPUT, at("dir/sub/x"), "--out"};
        expect(&t, "an output in a read-only directory names the reason", bad_out, 1, 0, "Permission denied");
        chmod(at("dir/sub"), 0755);
    }
    close(sock);
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    if (system(command) != 0)
        printf("note: could not remove %s\n", root);
    return tally_exit(&t);
}
