/* realpos import-hf / export-hf: HuggingFace BERT folders <-> realpos checkpoints
 * (train/model/hf.h, docs/huggingface.md). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/common.h"
#include "train/cli/commands.h"
#include "train/tasks/loaded_model.h"
#include "train/model/checkpoint.h"
#include "train/model/hf.h"
#include "train/tasks/glue.h"

typedef struct {
    const char *vocab_text;
    int do_lower_case;
} VocabExtra;

static void write_vocab(hid_t file, const void *ctx) {
    const VocabExtra *v = ctx;
    checkpoint_write_vocab(file, v->vocab_text, v->do_lower_case);
}

int cmd_import_hf(int argc, char **argv) {
    const char *usage = "import-hf DIR --out CKPT.h5 [--config-out FILE.ini]";
    const char *out = NULL, *config_out = NULL;
    CliOption options[] = {{"out", &out}, {"config-out", &config_out}};
    CliArgs a = cli_parse(argc, argv, options, 2);
    RP_CHECK(a.num_positional == 1 && out && !a.num_sets, "usage: realpos %s", usage);
    const char *dir = a.positional[0];
    int lower = hf_read_lower_case(dir); /* before the weights: a refusal costs nothing */
    HfImport imp;
    Model m;
    hf_import(dir, &imp, &m, stdout);
    imp.cfg.data.do_lower_case = lower;
    char vocab_path[4096];
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", dir);
    size_t len;
    char *vocab = read_file(vocab_path, &len, "vocabulary");
    Tokenizer *tok = tokenizer_from_text(vocab, len, imp.cfg.data.do_lower_case, vocab_path);
    RP_CHECK(tokenizer_vocab_size(tok) == m.cfg.vocab_size,
             "%s: the vocabulary has %d tokens but config.json says vocab_size = %d", vocab_path,
             tokenizer_vocab_size(tok), m.cfg.vocab_size);
    tokenizer_free(tok);
    config_validate(&imp.cfg);
    char *ini = config_to_ini(&imp.cfg);
    VocabExtra extra = {vocab, imp.cfg.data.do_lower_case};
    CheckpointExtras extras = {ini, NULL, write_vocab, &extra, NULL};
    checkpoint_save(out, &m, &extras);
    if (config_out)
        write_file(config_out, ini, strlen(ini));
    rp_log("wrote %s (%s, %s)", out, m.cfg.absolute_position ? "absolute positions"
           : m.cfg.relative_position == REL_SHAW ? "relative_key = shaw" : "relative_key_query = method4",
           imp.cfg.data.do_lower_case ? "lower-cased" : "cased");
    free(ini);
    free(vocab);
    model_free(&m);
    return 0;
}

/* --out must not exist, or be an empty directory (replaced when the export is complete).
 * Returns 1 if it exists. */
static int check_out_dir(const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        RP_CHECK(errno == ENOENT, "%s: %s", dir, strerror(errno));
        return 0;
    }
    DIR *d = S_ISDIR(st.st_mode) ? opendir(dir) : NULL;
    int entries = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    RP_CHECK(d && !entries, "%s: already exists (and is not an empty directory); choose a new --out", dir);
    closedir(d);
    return 1;
}

int cmd_export_hf(int argc, char **argv) {
    const char *usage = "export-hf CKPT.h5 --out DIR [--vocab VOCAB.txt]";
    const char *out = NULL, *vocab_path = NULL;
    CliOption options[] = {{"out", &out}, {"vocab", &vocab_path}};
    CliArgs a = cli_parse(argc, argv, options, 2);
    RP_CHECK(a.num_positional == 1 && out && !a.num_sets, "usage: realpos %s", usage);
    const char *ckpt = a.positional[0];
    char out_dir[4000];
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') /* "DIR/" names DIR: the temp directory goes beside it */
        n--;
    RP_CHECK(n < sizeof out_dir, "--out: path too long");
    memcpy(out_dir, out, n);
    out_dir[n] = '\0';
    out = out_dir;
    LoadedModel lm;
    load_model_with_vocab(&lm, ckpt, vocab_path);
    char why[512];
    RP_CHECK(hf_export_check(&lm.cfg, lm.model.heads, why, sizeof why),
             "%s: HuggingFace BERT cannot express this model: %s", ckpt, why);
    const char *label_names[GLUE_MAX_LABELS];
    GlueLayout layout;
    int named = 0;
    if (lm.model.heads.num_labels && lm.cfg.task.type == TASK_CLASSIFICATION) {
        layout = glue_layout(&lm.cfg.task);
        named = layout.num_labels == lm.model.heads.num_labels;
        for (int i = 0; named && i < layout.num_labels; i++)
            label_names[i] = layout.label_names[i];
    }
    int replace = check_out_dir(out);
    char tmp[4096], path[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    mkdir_p(tmp);
    hf_export(tmp, &lm.cfg, &lm.model, named ? label_names : NULL);
    snprintf(path, sizeof path, "%s/vocab.txt", tmp);
    write_file(path, lm.vocab_text, strlen(lm.vocab_text));
    hf_write_tokenizer_config(tmp, lm.cfg.data.do_lower_case, lm.cfg.model.max_position);
    RP_CHECK((!replace || rmdir(out) == 0) && rename(tmp, out) == 0, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
    rp_log("wrote %s", out);
    loaded_model_free(&lm);
    return 0;
}
