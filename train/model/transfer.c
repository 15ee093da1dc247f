/* Loading a checkpoint into a model with different heads or position settings (transfer.h). */
#include "train/model/transfer.h"

#include <string.h>

#include "core/common.h"
#include "core/h5io.h"
#include "train/model/checkpoint.h"

#define POSITION_TABLE "bert/embeddings/position_embeddings/weight"
#define T5_TABLE "bert/encoder/relative_attention_bias/weight"

void transfer_print(FILE *table, const char *status, const char *name, int rank, const hsize_t *dims) {
    if (!table)
        return;
    char shape[64];
    h5_shape_text(shape, sizeof shape, rank, dims);
    fprintf(table, "  %-12s %-64s %s\n", status, name, shape);
}

void transfer_print_summary(FILE *table, const TransferSummary *s) {
    if (!table)
        return;
    fprintf(table, "  %d loaded, %d grown, %d initialised, %d dropped\n", s->loaded, s->grown, s->initialised,
            s->dropped);
}

typedef struct {
    const Model *m;
    FILE *table;
    TransferSummary *summary;
} DropScan;

static void report_dropped(const char *name, int rank, const hsize_t *dims, void *ctx) {
    DropScan *scan = ctx;
    if (model_find_param(scan->m, name))
        return;
    transfer_print(scan->table, "dropped", name, rank, dims);
    scan->summary->dropped++;
}

TransferSummary transfer_load(hid_t file, const char *path, Model *m, FILE *table) {
    TransferSummary s = {0, 0, 0, 0};
    if (table)
        fprintf(table, "parameters from %s:\n", path);
    char dataset[PARAM_NAME_MAX + 8], have[64], want[64];
    for (int i = 0; i < m->table.count; i++) {
        const ParamInfo *p = &m->table.items[i];
        hsize_t dims[2];
        int rank = h5_param_dims(p, dims);
        h5_shape_text(want, sizeof want, rank, dims);
        snprintf(dataset, sizeof dataset, "model/%s", p->name);
        if (!h5_exists(file, dataset)) {
            /* a T5 table added to a model without one starts at zero: every score, hence every
             * output of step 0, is the checkpoint model's (the drop-in) */
            const int zero = !strcmp(p->name, T5_TABLE);
            if (zero)
                memset(m->params + p->offset, 0, p->count * sizeof(float));
            transfer_print(table, zero ? "zeroed" : "initialised", p->name, rank, dims);
            s.initialised++;
            continue;
        }
        hsize_t stored[4];
        int stored_rank = h5_shape(file, path, dataset, stored);
        h5_shape_text(have, sizeof have, stored_rank, stored);
        float *w = m->params + p->offset;
        if (stored_rank == rank && stored[0] == dims[0] && (rank == 1 || stored[1] == dims[1])) {
            h5_read_floats(file, path, dataset, w, rank, dims);
            transfer_print(table, "loaded", p->name, rank, dims);
            s.loaded++;
        } else if (!strcmp(p->name, POSITION_TABLE) && stored_rank == 2 && stored[1] == dims[1] &&
                   stored[0] < dims[0]) {
            /* rows are positions: the checkpoint's positions load, the new ones keep their init */
            h5_read_floats(file, path, dataset, w, 2, stored);
            if (table)
                fprintf(table, "  grown        %-64s %s -> %s: rows 0-%llu loaded, %llu-%llu initialised\n",
                        p->name, have, want, (unsigned long long)stored[0] - 1, (unsigned long long)stored[0],
                        (unsigned long long)dims[0] - 1);
            s.grown++;
        } else {
            RP_FATAL("%s: parameter '%s': the checkpoint has shape %s, the fine-tuning model needs %s", path, p->name,
                     have, want);
        }
    }
    DropScan scan = {m, table, &s};
    checkpoint_each_model_dataset(file, path, report_dropped, &scan);
    transfer_print_summary(table, &s);
    return s;
}
