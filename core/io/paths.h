/* The one place where realpos decides whether a path may be read or written.
 *
 * require_regular_file: every file argument is stat'ed before it is opened, so that a FIFO
 * (which would block the open forever), a directory (which reads as an error or as a file of
 * 2^63 - 1 bytes), a device or a socket is refused with a message naming the path, what it is
 * and its role ("config", "--out", "key 'task.init_checkpoint'").
 *
 * IoPlan: a command lists every path it will read and write, then calls io_plan_check once,
 * before any work (no half-written output, no hour of training lost to a path typo). Paths are
 * compared by identity, not by spelling: an existing path by device + inode (through links and
 * any spelling), a path that does not exist yet by the realpath of its parent + its name. Rules:
 *   1. an input file must be a regular file, an input folder a directory (require_regular_file);
 *   2. an output may not be an input (writing would destroy it: `import-hf DIR --out
 *      DIR/config.json`, `predict --input X --out X`);
 *   3. no two outputs may be one path (the second would overwrite the first: `--out X
 *      --config-out X`);
 *   4. an output may not lie inside an input folder (io_plan_input_dir: a folder the command
 *      reads as a whole, listing it or reading names found in it, so any file inside it may be
 *      read after the output was written);
 *   5. an input may not lie inside an output folder (io_plan_output_dir: a folder replaced as a
 *      whole, or into which files of names not known in advance are written, e.g. a run
 *      directory's ckpt-STEP.h5: the input could be overwritten mid-run).
 * Outputs nested in output folders are allowed (a run directory's files), and an output file may
 * lie inside a folder only some of whose files are read: a command registers each file it reads
 * with io_plan_input (e.g. `import-hf DIR --out DIR/model.h5` is allowed, `--out
 * DIR/model.safetensors` is not): rules 4 and 5 refuse only what can destroy an input.
 * An output file that exists must be a regular file (or a link to one: the link is replaced, its
 * target untouched); an output folder that exists must be a directory; the folder an output is
 * written into must exist and be writable (checked here, so that a read-only or missing directory
 * fails before the work, with the system's reason). Every violation is fatal, naming both roles
 * and both paths.
 *
 * The plan holds the callers' strings (they must live until io_plan_check); no allocation, no
 * global state. */
#pragma once
#include <stddef.h>
#include <stdio.h>

#define IO_PLAN_MAX 1024 /* paths per plan (e.g. the checkpoints of `realpos average`) */

typedef enum { IO_INPUT, IO_INPUT_DIR, IO_OUTPUT, IO_OUTPUT_DIR } IoKind;

typedef struct {
    const char *path;
    const char *what; /* its role in messages: "--out", "config", "key 'task.train_file'" */
    IoKind kind;
} IoEntry;

typedef struct {
    IoEntry entries[IO_PLAN_MAX];
    int count;
} IoPlan;

/* Fatal unless path is (or links to) a regular file: missing, a FIFO, a directory, a device or a
 * socket is named ("PATH: config is a FIFO (named pipe), expected a regular file"). /dev/null is
 * accepted as an input (it reads as an empty file: `realpos finetune /dev/null --set ...`). */
void require_regular_file(const char *path, const char *what);
/* Opens path for reading under the same rules, without a window between the check and the open:
 * opened with O_NONBLOCK (a FIFO does not block the open) and then fstat'ed, so a FIFO, a
 * directory, a device or a socket is refused, naming what it is; a symbolic link loop is named as
 * a loop. A path that does not exist returns NULL when missing_ok (fatal otherwise). */
FILE *open_regular_file(const char *path, const char *what, int missing_ok);
/* errno's reason in messages: strerror, but a loop of symbolic links is named as such. */
const char *path_error_text(int error);
/* Fatal unless path is (or links to) a directory. */
void require_directory(const char *path, const char *what);

void io_plan_init(IoPlan *plan);
void io_plan_input(IoPlan *plan, const char *path, const char *what);
void io_plan_input_dir(IoPlan *plan, const char *path, const char *what);
void io_plan_output(IoPlan *plan, const char *path, const char *what);
void io_plan_output_dir(IoPlan *plan, const char *path, const char *what);
/* Apply rules 1-5 to every path of the plan; fatal on the first violation. */
void io_plan_check(const IoPlan *plan);

/* Rule 2 alone, for callers not yet converted to a plan (train/data/corpus_prepare.c,
 * train/cli/cmd_finetune.c's finetune): fatal if output is the same file as input. An input or
 * output that is NULL, "" or absent is skipped (the caller reports a missing input itself). */
void require_distinct_files(const char *input, const char *input_what, const char *output, const char *output_what);

/* The directory part of path ("." if none). */
void path_directory(char *out, size_t size, const char *path);
