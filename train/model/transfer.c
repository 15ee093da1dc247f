/* Loading a checkpoint into a model with different heads or position settings (transfer.h). */
#include "train/model/transfer.h"

#include <string.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "train/model/checkpoint.h"

#define POSITION_TABLE "bert/embeddings/position_embeddings/weight"

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Whether parameter `name` is the table of the position scheme `scheme` (each layer's, or T5's one
 * for the encoder): a table the checkpoint lacks starts at the scheme's transfer_identity, the
 * value that makes its term of the score vanish (docs/attention.md), so that the model computes
 * the checkpoint model's scores until training moves the table (alibi and rope have none: their
 * outputs change at step 0, docs/finetune.md). */
static int is_scheme_table(const PosScheme *scheme, const char *name) {
    return scheme->table_name && scheme->transfer_vanishes && ends_with(name, scheme->table_name);
}

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

TransferSummary transfer_load(hid_t file, const char *path, Model *m, const char *model, FILE *table) {
    TransferSummary s = {0, 0, 0, 0};
    const PosScheme *scheme = pos_scheme(m->cfg.relative_position);
    int added = 0; /* this transfer adds the scheme's tables */
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
            if (is_scheme_table(scheme, p->name)) { /* a scheme the checkpoint lacks: its term starts at nothing */
                float *w = m->params + p->offset;
                for (size_t e = 0; e < p->count; e++)
                    w[e] = scheme->transfer_identity;
                added = 1;
            }
            transfer_print(table, "initialised", p->name, rank, dims);
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
            RP_FATAL("%s: parameter '%s': the checkpoint has shape %s, %s needs %s", path, p->name, have, model, want);
        }
    }
    DropScan scan = {m, table, &s};
    checkpoint_each_model_dataset(file, path, report_dropped, &scan);
    transfer_print_summary(table, &s);
    if (table && added)
        fprintf(table, "  the added relative tables start at %g everywhere (%s): the scores are the checkpoint "
                "model's until training changes them\n", (double)scheme->transfer_identity,
                scheme->transfer_vanishes);
    return s;
}

void transfer_note_positions(const ModelConfig *now, const ModelConfig *stored) {
    const char *note = pos_scheme(now->relative_position)->transfer_note;
    if (now->relative_position == stored->relative_position || !note)
        return;
    rp_log("relative_position = %s on a %s checkpoint: %s", rel_kind_name(now->relative_position),
           rel_kind_name(stored->relative_position), note);
}
