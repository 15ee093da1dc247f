/* Mean of several checkpoints' parameters (average.h). */
#include "train/model/average.h"

#include <string.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "train/model/checkpoint.h"

/* [model] keys that may differ between averaged checkpoints (training-only settings). */
static const char *const training_only_keys[] = {"hidden_dropout", "attention_dropout"};

long checkpoint_step(hid_t file, const char *path) {
    if (h5_exists(file, "train/step")) {
        int64_t step;
        hsize_t one = 1;
        h5_read_int64s(file, path, "train/step", &step, 1, &one);
        return (long)step;
    }
    if (!h5_exists(file, "optimizer"))
        return -1;
    hid_t g = H5Gopen2(file, "optimizer", H5P_DEFAULT);
    long step = h5_attr_exists(g, "step") ? (long)h5_attr_read_int64(g, "step", path) : -1;
    H5Gclose(g);
    return step;
}

/* The datasets under /model with their shapes, sorted by name. */
typedef struct {
    char name[PARAM_NAME_MAX + 64];
    int rank;
    hsize_t dims[4];
} DatasetEntry;

typedef struct {
    DatasetEntry *items;
    int count, capacity;
} DatasetList;

static void collect_dataset(const char *name, int rank, const hsize_t *dims, void *ctx) {
    DatasetList *list = ctx;
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? 2 * list->capacity : 64;
        list->items = realloc(list->items, sizeof(DatasetEntry) * (size_t)list->capacity);
        RP_CHECK(list->items, "out of memory listing checkpoint datasets");
    }
    DatasetEntry *e = &list->items[list->count++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->rank = rank;
    memcpy(e->dims, dims, sizeof e->dims);
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const DatasetEntry *)a)->name, ((const DatasetEntry *)b)->name);
}

static DatasetList list_datasets(hid_t file, const char *path) {
    DatasetList list = {NULL, 0, 0};
    checkpoint_each_model_dataset(file, path, collect_dataset, &list);
    qsort(list.items, (size_t)list.count, sizeof(DatasetEntry), by_name);
    return list;
}

/* Fatal at the first dataset present in one list only, or present in both with other shapes. */
static void require_same_datasets(const DatasetList *a, const char *path_a, const DatasetList *b,
                                  const char *path_b) {
    char shape_a[128], shape_b[128];
    int i = 0, j = 0;
    while (i < a->count || j < b->count) {
        int order = i == a->count ? 1 : j == b->count ? -1 : strcmp(a->items[i].name, b->items[j].name);
        const DatasetEntry *ea = order <= 0 ? &a->items[i] : NULL, *eb = order >= 0 ? &b->items[j] : NULL;
        if (ea)
            h5_shape_text(shape_a, sizeof shape_a, ea->rank, ea->dims);
        if (eb)
            h5_shape_text(shape_b, sizeof shape_b, eb->rank, eb->dims);
        RP_CHECK(ea, "%s: dataset '/model/%s' %s is not in %s; averaged checkpoints must have the same parameters",
                 path_b, eb->name, shape_b, path_a);
        RP_CHECK(eb, "%s: no dataset '/model/%s', which %s has %s; averaged checkpoints must have the same "
                 "parameters", path_b, ea->name, path_a, shape_a);
        RP_CHECK(ea->rank == eb->rank && !memcmp(ea->dims, eb->dims, sizeof(hsize_t) * (size_t)ea->rank),
                 "%s: dataset '/model/%s' has shape %s, but %s has %s; averaged checkpoints must have the same "
                 "parameters", path_b, ea->name, shape_b, path_a, shape_a);
        i++;
        j++;
    }
}

/* The line number (1-based) where two texts first differ. */
static int first_different_line(const char *a, const char *b) {
    int line = 1;
    for (; *a && *a == *b; a++, b++)
        line += *a == '\n';
    return line;
}

/* Averaged weights mean something only if every input reads its inputs and names its outputs the
 * same way: the same vocabulary (token ids) and, for a classifier, the same labels in the same
 * order (classifier rows). Fatal at the first difference, naming both files. */
static void require_same_meaning(const Config *a, const char *vocab_a, const char *path_a, const Config *b,
                                 const char *vocab_b, const char *path_b, int num_labels) {
    RP_CHECK(!vocab_a == !vocab_b, "%s %s a /vocab, but %s %s; averaged checkpoints must share the vocabulary",
             path_b, vocab_b ? "has" : "has no", path_a, vocab_a ? "has one" : "has none");
    if (vocab_a) {
        RP_CHECK(!strcmp(vocab_a, vocab_b), "%s: its vocabulary differs from %s's from line %d on; averaged "
                 "checkpoints must share the vocabulary (the same token ids)", path_b, path_a,
                 first_different_line(vocab_a, vocab_b));
        RP_CHECK(a->data.do_lower_case == b->data.do_lower_case, "%s: do_lower_case = %d, but %s has %d; averaged "
                 "checkpoints must tokenize alike", path_b, b->data.do_lower_case, path_a, a->data.do_lower_case);
    }
    if (!num_labels)
        return;
    RP_CHECK(a->task.type == b->task.type && a->task.glue_task == b->task.glue_task,
             "%s: key 'task.type' / 'task.glue_task' is %s / %s, but %s has %s / %s; averaged classifiers must "
             "share their labels", path_b, task_kind_name(b->task.type), glue_task_name(b->task.glue_task), path_a,
             task_kind_name(a->task.type), glue_task_name(a->task.glue_task));
    RP_CHECK(a->task.glue_task != GLUE_NONE || a->task.type != TASK_CLASSIFICATION ||
                 !strcmp(a->task.labels, b->task.labels),
             "%s: key 'task.labels' is \"%s\", but %s has \"%s\"; averaged classifiers must have the same labels in "
             "the same order (classifier row i is label i)", path_b, b->task.labels, path_a, a->task.labels);
    RP_CHECK(a->task.type != TASK_TAGGING || !strcmp(a->task.tag_labels, b->task.tag_labels),
             "%s: key 'task.tag_labels' is \"%s\", but %s has \"%s\"; averaged tagging models must have the same "
             "labels in the same order (classifier row i is label i)", path_b, b->task.tag_labels, path_a,
             a->task.tag_labels);
}

void checkpoint_average(CheckpointAverage *avg, const char *const *paths, int count) {
    RP_CHECK(count >= 1, "average: no checkpoints to average");
    memset(avg, 0, sizeof *avg);
    avg->count = count;
    avg->steps = xmalloc(sizeof(long) * (size_t)count);
    Config first;
    char *first_vocab = NULL;
    DatasetList first_list = {NULL, 0, 0};
    double *sum = NULL;
    size_t n = 0;
    for (int c = 0; c < count; c++) {
        CheckpointFile file;
        checkpoint_file_open(&file, paths[c]);
        hid_t f = file.file;
        const Config cfg = file.cfg;
        DatasetList list = list_datasets(f, paths[c]);
        if (c == 0) {
            first = cfg;
            first_list = list;
            int lower;
            first_vocab = checkpoint_read_vocab(f, paths[c], &lower);
            avg->config_ini = xstrdup(file.config_ini);
            model_create(&avg->model, &cfg.model, file.heads);
            n = avg->model.table.block_floats;
            sum = xcalloc(n, sizeof(double));
        } else {
            ConfigDifference diff;
            if (config_model_difference(&first, &cfg, training_only_keys, 2, &diff))
                RP_FATAL("%s: key '%s' is %s, but %s has %s; averaged checkpoints must share the model config",
                         paths[c], diff.key, diff.b, paths[0], diff.a);
            require_same_datasets(&first_list, paths[0], &list, paths[c]);
            int lower;
            char *vocab = checkpoint_read_vocab(f, paths[c], &lower);
            require_same_meaning(&first, first_vocab, paths[0], &cfg, vocab, paths[c], avg->model.heads.num_labels);
            free(vocab);
            free(list.items);
        }
        checkpoint_load_model(f, paths[c], &avg->model);
        avg->steps[c] = checkpoint_step(f, paths[c]);
        checkpoint_file_close(&file);
        const float *w = avg->model.params;
#pragma omp parallel for schedule(static)
        for (size_t e = 0; e < n; e++)
            sum[e] += (double)w[e];
    }
    float *w = avg->model.params;
#pragma omp parallel for schedule(static)
    for (size_t e = 0; e < n; e++)
        w[e] = (float)(sum[e] / (double)count);
    free(sum);
    free(first_vocab);
    free(first_list.items);
}

void checkpoint_average_free(CheckpointAverage *avg) {
    model_free(&avg->model);
    free(avg->config_ini);
    free(avg->steps);
    memset(avg, 0, sizeof *avg);
}
