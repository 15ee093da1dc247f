/* realpos import-hf / export-hf: HuggingFace BERT folders <-> realpos checkpoints
 * (train/model/hf.h, docs/huggingface.md). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/atomic_file.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "train/cli/commands.h"
#include "train/tasks/loaded_model.h"
#include "train/model/checkpoint.h"
#include "train/model/hf.h"
#include "train/tasks/conll.h"
#include "train/tasks/glue.h"

typedef struct {
    const char *vocab_text;
    int do_lower_case;
} VocabExtra;

static void write_vocab(hid_t file, const void *ctx) {
    const VocabExtra *v = ctx;
    checkpoint_write_vocab(file, v->vocab_text, v->do_lower_case);
}

/* An imported checkpoint must load where a saved one does: its stored config reads back and
 * validates, and its labels are what predict and inspect will parse. */
static void check_as_loaded(const char *ini, const char *out) {
    Config back;
    config_load_string(&back, ini, out);
    if (back.task.type == TASK_CLASSIFICATION)
        (void)glue_layout(&back.task);
}

int cmd_import_hf(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *out = NULL, *config_out = NULL;
    CliOption options[] = {{"out", &out}, {"config-out", &config_out}};
    CliArgs a = cli_parse(argc, argv, options, 2);
    RP_CHECK(a.num_positional == 1 && out && !a.num_sets, "usage: realpos %s", usage);
    const char *dir = a.positional[0];
    IoPlan *plan = xmalloc(sizeof *plan);
    HfFiles *files = xmalloc(sizeof *files);
    io_plan_init(plan);
    hf_plan_inputs(dir, files, plan);
    io_plan_output(plan, out, "--out");
    if (config_out)
        io_plan_output(plan, config_out, "--config-out");
    io_plan_check(plan);
    free(files);
    free(plan);
    int lower = hf_read_lower_case(dir); /* before the weights: a refusal costs nothing */
    HfImport imp;
    Model m;
    hf_import(dir, &imp, &m, stdout);
    imp.cfg.data.do_lower_case = lower;
    char vocab_path[4096];
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", dir);
    size_t len;
    char *vocab = read_file(vocab_path, &len, "vocabulary");
    Tokenizer *tok = tokenizer_for_model(vocab, len, imp.cfg.data.do_lower_case, vocab_path, m.cfg.vocab_size,
                                         "config.json says vocab_size");
    tokenizer_free(tok);
    config_validate(&imp.cfg);
    char *ini = config_to_ini(&imp.cfg);
    check_as_loaded(ini, out);
    VocabExtra extra = {vocab, imp.cfg.data.do_lower_case};
    CheckpointExtras extras = {ini, NULL, write_vocab, &extra, NULL};
    checkpoint_save(out, &m, &extras);
    if (config_out)
        write_file(config_out, ini, strlen(ini));
    char positions[64] = "absolute positions";
    if (!m.cfg.absolute_position)
        snprintf(positions, sizeof positions, "%s = %s", pos_scheme(m.cfg.relative_position)->hf_type,
                 rel_kind_name(m.cfg.relative_position));
    rp_log("wrote %s (%s, %s)", out, positions, imp.cfg.data.do_lower_case ? "lower-cased" : "cased");
    free(ini);
    free(vocab);
    model_free(&m);
    return 0;
}

/* --out must not exist, or be an empty directory (replaced when the export is complete: rename
 * onto an empty directory replaces it); a symbolic link is refused, since the rename would replace
 * the link, not the folder it names. */
static void check_out_dir(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        RP_CHECK(errno == ENOENT, "%s: --out: %s", dir, strerror(errno));
        return;
    }
    RP_CHECK(!S_ISLNK(st.st_mode), "%s: --out is a symbolic link; export-hf replaces the folder as a whole: give the "
             "folder's own path", dir);
    DIR *d = S_ISDIR(st.st_mode) ? opendir(dir) : NULL;
    int entries = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    RP_CHECK(d && !entries, "%s: already exists (and is not an empty directory); choose a new --out", dir);
    closedir(d);
}

/* Remove the temporary folders OUT.tmp.PID that an export killed mid-write left beside out, when
 * process PID is gone (a live one may still be writing its own). Only this exact name is touched. */
static void remove_stale_exports(const char *out) {
    char parent[PATH_MAX];
    path_directory(parent, sizeof parent, out);
    const char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out;
    const size_t base_len = strlen(base);
    DIR *d = opendir(parent);
    for (struct dirent *e; d && (e = readdir(d));) {
        const long pid = temp_name_stale_pid(e->d_name);
        if (!pid || strncmp(e->d_name, base, base_len) || strncmp(e->d_name + base_len, ".tmp.", 5))
            continue; /* another name, or a writer still alive */
        char path[2 * PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        remove_temp_dir(path);
        rp_log("removed %s, left by an export that was killed (process %ld is gone)", path, pid);
    }
    if (d)
        closedir(d);
}

/* The folder's files, written into tmp: 0, or -1 with the reason in why. */
static int write_export(const char *tmp, const LoadedModel *lm, const char *const *label_names, char *why,
                        size_t why_size) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/vocab.txt", tmp);
    if (hf_export(tmp, &lm->cfg, &lm->model, label_names, why, why_size) != 0 ||
        write_file_status(path, lm->vocab_text, strlen(lm->vocab_text), why, why_size) != 0)
        return -1;
    return hf_write_tokenizer_config(tmp, lm->cfg.data.do_lower_case, lm->cfg.model.max_position, why, why_size);
}

int cmd_export_hf(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *out = NULL, *vocab_path = NULL;
    CliOption options[] = {{"out", &out}, {"vocab", &vocab_path}};
    CliArgs a = cli_parse(argc, argv, options, 2);
    RP_CHECK(a.num_positional == 1 && out && !a.num_sets, "usage: realpos %s", usage);
    char ckpt[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest */
    checkpoint_resolve(a.positional[0], NULL, ckpt, sizeof ckpt);
    char out_dir[PATH_MAX];
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') /* "DIR/" names DIR: the temp directory goes beside it */
        n--;
    RP_CHECK(n < sizeof out_dir - 32, "--out: path too long");
    memcpy(out_dir, out, n);
    out_dir[n] = '\0';
    out = out_dir;
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, ckpt, "checkpoint");
    if (vocab_path)
        io_plan_input(&plan, vocab_path, "--vocab");
    io_plan_output_dir(&plan, out, "--out");
    io_plan_check(&plan);
    check_out_dir(out);
    LoadedModel lm;
    load_model_with_vocab(&lm, ckpt, vocab_path);
    char why[3 * PATH_MAX];
    RP_CHECK(hf_export_check(&lm.cfg, lm.model.heads, why, sizeof why),
             "%s: HuggingFace BERT cannot express this model (nothing written): %s", ckpt, why);
    const char *label_names[TAG_MAX_LABELS];
    GlueLayout layout;
    TagLabels tags;
    int named = 0;
    if (lm.model.heads.num_labels && lm.cfg.task.type == TASK_TAGGING && lm.cfg.task.tag_labels[0]) {
        tag_labels_parse(&tags, lm.cfg.task.tag_labels, "the checkpoint's task.tag_labels");
        named = tags.count == lm.model.heads.num_labels;
        for (int i = 0; named && i < tags.count; i++)
            label_names[i] = tags.names[i];
    }
    if (lm.model.heads.num_labels && lm.cfg.task.type == TASK_CLASSIFICATION) {
        layout = glue_layout(&lm.cfg.task);
        named = layout.num_labels == lm.model.heads.num_labels;
        for (int i = 0; named && i < layout.num_labels; i++)
            label_names[i] = layout.label_names[i];
    }
    remove_stale_exports(out);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    RP_CHECK(mkdir(tmp, 0755) == 0, "%s: cannot create the temporary folder %s: %s", out, tmp, strerror(errno));
    int rc = write_export(tmp, &lm, named ? label_names : NULL, why, sizeof why);
    if (rc == 0 && rename(tmp, out) != 0) { /* onto a missing path or an empty directory */
        snprintf(why, sizeof why, "%s: cannot rename %s onto it: %s", out, tmp, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        remove_temp_dir(tmp);
        RP_FATAL("%s; removed the temporary folder %s", why, tmp);
    }
    rp_log("wrote %s", out);
    loaded_model_free(&lm);
    return 0;
}
