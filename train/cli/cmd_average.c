/* realpos average: the mean of several checkpoints' weights (train/model/average.h), written as
 * a weights-only checkpoint (no /optimizer, no /train) with the first input's config and
 * vocabulary; root attributes averaged_count and averaged_inputs ("PATH\tSTEP" per line, STEP -1
 * when the input records none) name the inputs. --last N RUN_DIR takes the N newest checkpoints of
 * the lineage its `latest` names, as RUN_DIR/lineage.tsv records it (run_dir_lineage, what pruning
 * keeps to): a checkpoint another run left there is not averaged in, and a run directory without
 * that record, or whose record names a missing file, is refused. */
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/h5io.h"
#include "core/io/paths.h"
#include "train/cli/commands.h"
#include "train/model/average.h"
#include "train/loop/run_dir.h"
#include "train/model/checkpoint.h"

/* The paths of the `last` newest checkpoints of RUN_DIR's lineage, oldest first (caller frees). */
static char **last_checkpoints(const char *run_dir, int last) {
    long *steps;
    int count = run_dir_lineage(run_dir, "average --last", &steps);
    RP_CHECK(count >= last, "average --last %d %s: the run's lineage (%s/lineage.tsv) has %d checkpoint%s", last,
             run_dir, run_dir, count, count == 1 ? "" : "s");
    char **paths = xmalloc(sizeof(char *) * (size_t)last);
    size_t size = strlen(run_dir) + 32;
    for (int i = 0; i < last; i++) {
        paths[i] = xmalloc(size);
        run_dir_checkpoint_name(paths[i], size, run_dir, steps[count - last + i]);
    }
    rp_log("average --last %d: steps %ld..%ld of the %d checkpoint%s the lineage of %s/latest records", last,
           steps[count - last], steps[count - 1], count, count == 1 ? "" : "s", run_dir);
    free(steps);
    return paths;
}

typedef struct {
    const CheckpointAverage *avg;
    const char *const *paths;
    char *vocab_text;       /* the first input's /vocab, or NULL */
    int do_lower_case;
} AverageOutput;

static void write_average_extras(hid_t file, const void *ctx) {
    const AverageOutput *out = ctx;
    if (out->vocab_text)
        checkpoint_write_vocab(file, out->vocab_text, out->do_lower_case);
    char *list = NULL;
    size_t size = 0;
    FILE *text = open_memstream(&list, &size);
    RP_CHECK(text, "out of memory listing the averaged checkpoints");
    for (int i = 0; i < out->avg->count; i++)
        fprintf(text, "%s\t%ld\n", out->paths[i], out->avg->steps[i]);
    RP_CHECK(fclose(text) == 0, "out of memory listing the averaged checkpoints");
    h5_attr_write_int64(file, "averaged_count", out->avg->count);
    h5_attr_write_string(file, "averaged_inputs", list);
    free(list);
}

int cmd_average(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *out = NULL, *last_text = NULL;
    CliOption options[] = {{"out", &out}, {"last", &last_text}};
    CliArgs a = cli_parse(argc, argv, options, 2);
    RP_CHECK(out && !a.num_sets && a.num_positional >= 1 && (!last_text || a.num_positional == 1),
             "usage: realpos %s", usage);
    int count = a.num_positional;
    char **paths = a.positional;
    if (last_text) {
        count = (int)cli_int("--last", last_text, 1, 1 << 20);
        char run_dir[CONFIG_PATH_MAX + 32]; /* RUN_DIR, RUN_DIR/ or RUN_DIR/latest: the run */
        const char *arg = a.positional[0], *base = strrchr(arg, '/');
        struct stat st;
        if (!strcmp(base ? base + 1 : arg, "latest") && !(stat(arg, &st) == 0 && S_ISDIR(st.st_mode)))
            path_directory(run_dir, sizeof run_dir, arg);
        else
            snprintf(run_dir, sizeof run_dir, "%s", arg);
        paths = last_checkpoints(run_dir, count);
    } else { /* each a checkpoint, RUN_DIR or RUN_DIR/latest (the run's newest) */
        paths = xmalloc(sizeof(char *) * (size_t)count);
        for (int i = 0; i < count; i++) {
            paths[i] = xmalloc(CONFIG_PATH_MAX + 32);
            checkpoint_resolve(a.positional[i], NULL, paths[i], CONFIG_PATH_MAX + 32);
        }
    }
    /* the output must not be an input (core/io/paths.h), and no input may come twice (it would weigh
     * double) */
    RP_CHECK(count < IO_PLAN_MAX, "average: at most %d checkpoints", IO_PLAN_MAX - 1);
    IoPlan *plan = xmalloc(sizeof *plan);
    io_plan_init(plan);
    for (int i = 0; i < count; i++)
        io_plan_input(plan, paths[i], "the checkpoint");
    io_plan_output(plan, out, "--out");
    io_plan_check(plan);
    free(plan);
    struct stat *in_stat = xmalloc(sizeof(struct stat) * (size_t)count);
    for (int i = 0; i < count; i++) {
        RP_CHECK(stat(paths[i], &in_stat[i]) == 0, "%s: no such checkpoint", paths[i]);
        for (int j = 0; j < i; j++)
            RP_CHECK(in_stat[j].st_dev != in_stat[i].st_dev || in_stat[j].st_ino != in_stat[i].st_ino,
                     "%s is given twice (as %s and %s); each checkpoint is averaged once", paths[i], paths[j],
                     paths[i]);
    }
    free(in_stat);
    CheckpointAverage avg;
    checkpoint_average(&avg, (const char *const *)paths, count);
    AverageOutput extras_ctx = {&avg, (const char *const *)paths, NULL, 0};
    CheckpointFile first;
    checkpoint_file_open(&first, paths[0]);
    extras_ctx.vocab_text = checkpoint_read_vocab(first.file, paths[0], &extras_ctx.do_lower_case);
    checkpoint_file_close(&first);
    CheckpointExtras extras = {.config_ini = avg.config_ini, .write_extra = write_average_extras,
                               .extra_ctx = &extras_ctx};
    checkpoint_save(out, &avg.model, &extras);
    rp_log("wrote %s: the mean of %d checkpoint%s (steps %ld..%ld)", out, count, count > 1 ? "s" : "", avg.steps[0],
           avg.steps[count - 1]);
    free(extras_ctx.vocab_text);
    checkpoint_average_free(&avg);
    for (int i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
    return 0;
}
