#include "train/model/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "core/io/paths.h"

void checkpoint_write_block(hid_t file, const char *group, const ParamTable *t, const float *block) {
    char name[PARAM_NAME_MAX + 64];
    for (int i = 0; i < t->count; i++) {
        const ParamInfo *p = &t->items[i];
        hsize_t dims[2];
        int rank = h5_param_dims(p, dims);
        snprintf(name, sizeof name, "%s/%s", group, p->name);
        h5_write_floats(file, name, block + p->offset, rank, dims);
    }
}

void checkpoint_save(const char *path, const Model *m, const CheckpointExtras *extras) {
    char tmp[4096], dir[4096];
    path_directory(dir, sizeof dir, path);
    remove_stale_temp_files(dir);
    hid_t f = h5_create_temp(path, tmp, sizeof tmp);
    h5_attr_write_string(f, "format", CHECKPOINT_FORMAT);
    h5_attr_write_int64(f, "version", CHECKPOINT_VERSION);
    h5_attr_write_string(f, "config", extras->config_ini);
    if (extras->run_id)
        h5_attr_write_string(f, "run_id", extras->run_id);
    checkpoint_write_block(f, "model", &m->table, m->params);
    if (extras->optimizer) {
        checkpoint_write_block(f, "optimizer/exp_avg", &m->table, extras->optimizer->exp_avg);
        checkpoint_write_block(f, "optimizer/exp_avg_sq", &m->table, extras->optimizer->exp_avg_sq);
        hid_t g = H5Gopen2(f, "optimizer", H5P_DEFAULT);
        h5_attr_write_int64(g, "step", extras->optimizer->step);
        H5Gclose(g);
    }
    if (extras->write_extra)
        extras->write_extra(f, extras->extra_ctx);
    h5_commit(f, tmp, path); /* sealed, fsynced, renamed, the directory fsynced */
}

static hid_t open_verified(const char *path, char **config_ini) {
    hid_t f = h5_open(path, 0);
    RP_CHECK(h5_attr_exists(f, "format"), "%s: not a realpos checkpoint (no 'format' attribute)", path);
    char *format = h5_attr_read_string(f, "format", path);
    RP_CHECK(!strcmp(format, CHECKPOINT_FORMAT), "%s: attribute 'format': expected \"%s\", got \"%s\"", path,
             CHECKPOINT_FORMAT, format);
    free(format);
    int64_t version = h5_attr_read_int64(f, "version", path);
    RP_CHECK(version == CHECKPOINT_VERSION, "%s: attribute 'version': expected %d, got %lld", path,
             CHECKPOINT_VERSION, (long long)version);
    *config_ini = h5_attr_read_string(f, "config", path);
    return f;
}

static void read_block(hid_t file, const char *path, const char *group, const ParamTable *t, float *block) {
    char name[PARAM_NAME_MAX + 64];
    for (int i = 0; i < t->count; i++) {
        const ParamInfo *p = &t->items[i];
        hsize_t dims[2];
        int rank = h5_param_dims(p, dims);
        snprintf(name, sizeof name, "%s/%s", group, p->name);
        h5_read_floats(file, path, name, block + p->offset, rank, dims);
        const float *v = block + p->offset;
        for (size_t e = 0; e < p->count; e++)
            RP_CHECK(isfinite(v[e]), "%s: dataset '%s': element %zu is %g; a checkpoint must hold finite "
                     "values", path, name, e, (double)v[e]);
    }
}

static ModelHeads stored_heads(hid_t file, const char *path) {
    ModelHeads heads = {0, 0, 0, 0};
    heads.mlm = h5_exists(file, "model/cls/predictions");
    heads.pooler = h5_exists(file, "model/bert/pooler");
    heads.span = h5_exists(file, "model/qa_outputs");
    if (h5_exists(file, "model/classifier/bias")) {
        hsize_t dims[4];
        RP_CHECK(h5_shape(file, path, "model/classifier/bias", dims) == 1 && dims[0] >= 1,
                 "%s: dataset 'model/classifier/bias': expected shape [num_labels]", path);
        heads.num_labels = (int)dims[0];
    }
    return heads;
}

int checkpoint_name_step(const char *name, long *step) {
    if (strncmp(name, "ckpt-", 5))
        return 0;
    size_t digits = strspn(name + 5, "0123456789");
    if (digits < 7 || digits > 18 || strcmp(name + 5 + digits, ".h5"))
        return 0;
    *step = strtol(name + 5, NULL, 10);
    return 1;
}

int checkpoint_latest(const char *run_dir, char *out, size_t size) {
    char latest[CONFIG_PATH_MAX + 32];
    snprintf(latest, sizeof latest, "%s/latest", run_dir);
    FILE *f = open_regular_file(latest, "the run's latest checkpoint record", 1); /* NULL: none yet */
    if (!f)
        return 0;
    char name[256] = "";
    int got = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    long step;
    if (!got || !checkpoint_name_step(name, &step))
        return 0;
    int len = snprintf(out, size, "%s/%s", run_dir, name);
    return len > 0 && (size_t)len < size && access(out, F_OK) == 0;
}

void checkpoint_resolve(const char *arg, const char *what, char *out, size_t size) {
    char named[CONFIG_PATH_MAX + 64]; /* "what arg" for messages; a key reads "key 'k' = arg" */
    if (what)
        snprintf(named, sizeof named, "%s%s%s", what, strstr(what, "key '") ? " = " : " ", arg);
    else
        snprintf(named, sizeof named, "%s", arg);
    RP_CHECK(arg[0], "%s: expected a checkpoint (a file, RUN_DIR or RUN_DIR/latest), got nothing", what ? what : "");
    struct stat st;
    RP_CHECK(stat(arg, &st) == 0, "%s: %s (expected a checkpoint file, RUN_DIR or RUN_DIR/latest)", named,
             errno == ENOENT ? "no such file or directory" : path_error_text(errno));
    char dir[CONFIG_PATH_MAX + 32];
    size_t len = strlen(arg);
    while (len > 1 && arg[len - 1] == '/') /* "RUN_DIR/" (tab completion) names RUN_DIR */
        len--;
    RP_CHECK(len < sizeof dir && len < size, "%s: path too long", named);
    const char *base = memrchr(arg, '/', len);
    base = base ? base + 1 : arg;
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%.*s", (int)len, arg);
    } else if (!strcmp(base, "latest")) {
        path_directory(dir, sizeof dir, arg);
    } else {
        require_regular_file(arg, what ? what : "the checkpoint"); /* a FIFO, a device... named */
        snprintf(out, size, "%s", arg);
        return;
    }
    char latest[CONFIG_PATH_MAX + 40];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    struct stat lst; /* lstat: a dangling link or a loop is there, only the directory with no latest is new */
    RP_CHECK(lstat(latest, &lst) == 0, "%s: a directory with no checkpoint yet (no %s: a run writes it with its "
             "first checkpoint, every train.checkpoint_interval steps); name a checkpoint file instead", named, latest);
    RP_CHECK(checkpoint_latest(dir, out, size), "%s: %s does not name a checkpoint that exists (expected a first line "
             "ckpt-NNNNNNN.h5 of a file in %s)", named, latest, dir);
}

void checkpoint_file_open_as(CheckpointFile *c, const char *arg, const char *what) {
    memset(c, 0, sizeof *c);
    checkpoint_resolve(arg, what, c->path, sizeof c->path);
    const char *path = c->path;
    c->file = open_verified(path, &c->config_ini);
    config_load_string(&c->cfg, c->config_ini, path);
    c->heads = stored_heads(c->file, path);
}

void checkpoint_file_open(CheckpointFile *c, const char *arg) { checkpoint_file_open_as(c, arg, NULL); }

void checkpoint_file_close(CheckpointFile *c) {
    if (!c->config_ini)
        return; /* not open */
    h5_close(c->file, c->path);
    free(c->config_ini);
    memset(c, 0, sizeof *c);
}

void checkpoint_file_model(const CheckpointFile *c, Model *m, int inference) {
    if (inference)
        model_create_inference(m, &c->cfg.model, c->heads);
    else
        model_create(m, &c->cfg.model, c->heads);
    checkpoint_load_model(c->file, c->path, m);
}

typedef struct {
    const ParamTable *table;
    const char *unknown; /* first dataset under /model that the model does not have */
    char name[PARAM_NAME_MAX + 64];
} UnknownSearch;

static herr_t find_unknown(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
    (void)obj;
    UnknownSearch *search = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    for (int i = 0; i < search->table->count; i++)
        if (!strcmp(search->table->items[i].name, name))
            return 0;
    snprintf(search->name, sizeof search->name, "%s", name);
    search->unknown = search->name;
    return 1; /* stop */
}

void checkpoint_load_model(hid_t file, const char *path, Model *m) {
    read_block(file, path, "model", &m->table, m->params);
    UnknownSearch search = {&m->table, NULL, ""};
    hid_t group = H5Gopen2(file, "model", H5P_DEFAULT);
    H5Ovisit(group, H5_INDEX_NAME, H5_ITER_NATIVE, find_unknown, &search);
    H5Gclose(group);
    RP_CHECK(!search.unknown, "%s: dataset '/model/%s' is not a parameter of the model its config describes",
             path, search.unknown);
}

int checkpoint_load_optimizer(hid_t file, const char *path, const Model *m, AdamW *opt) {
    if (!h5_exists(file, "optimizer"))
        return 0;
    read_block(file, path, "optimizer/exp_avg", &m->table, opt->exp_avg);
    read_block(file, path, "optimizer/exp_avg_sq", &m->table, opt->exp_avg_sq);
    hid_t g = H5Gopen2(file, "optimizer", H5P_DEFAULT);
    int64_t step = h5_attr_read_int64(g, "step", path);
    H5Gclose(g);
    RP_CHECK(step >= 0 && step <= CHECKPOINT_MAX_STEP, "%s: attribute '/optimizer/step': expected an integer in "
             "[0, %lld], got %lld", path, (long long)CHECKPOINT_MAX_STEP, (long long)step);
    opt->step = step;
    return 1;
}

typedef struct {
    const char *path;
    void (*visit)(const char *name, int rank, const hsize_t *dims, void *ctx);
    void *ctx;
} DatasetVisit;

static herr_t visit_dataset(hid_t group, const char *name, const H5O_info_t *info, void *data) {
    DatasetVisit *v = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    hid_t ds = H5Dopen2(group, name, H5P_DEFAULT);
    RP_CHECK(ds >= 0, "%s: cannot open dataset '/model/%s'", v->path, name);
    hid_t space = H5Dget_space(ds);
    hsize_t dims[4] = {0, 0, 0, 0};
    int rank = H5Sget_simple_extent_ndims(space);
    RP_CHECK(rank >= 0 && rank <= 4, "%s: dataset '/model/%s': expected rank at most 4, got %d", v->path, name,
             rank);
    H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Dclose(ds);
    v->visit(name, rank, dims, v->ctx);
    return 0;
}

void checkpoint_each_model_dataset(hid_t file, const char *path,
                                   void (*visit)(const char *name, int rank, const hsize_t *dims, void *ctx),
                                   void *ctx) {
    RP_CHECK(h5_exists(file, "model"), "%s: no /model group", path);
    DatasetVisit v = {path, visit, ctx};
    hid_t group = H5Gopen2(file, "model", H5P_DEFAULT);
    H5Ovisit(group, H5_INDEX_NAME, H5_ITER_INC, visit_dataset, &v);
    H5Gclose(group);
}

void checkpoint_write_vocab(hid_t file, const char *vocab_text, int do_lower_case) {
    h5_write_string(file, "vocab", vocab_text);
    hid_t ds = H5Dopen2(file, "vocab", H5P_DEFAULT);
    h5_attr_write_int64(ds, "do_lower_case", do_lower_case);
    H5Dclose(ds);
}

char *checkpoint_read_vocab(hid_t file, const char *path, int *do_lower_case) {
    if (!h5_exists(file, "vocab"))
        return NULL;
    char *text = h5_read_string(file, path, "vocab");
    hid_t ds = H5Dopen2(file, "vocab", H5P_DEFAULT);
    *do_lower_case = (int)h5_attr_read_int64(ds, "do_lower_case", path);
    H5Dclose(ds);
    return text;
}
