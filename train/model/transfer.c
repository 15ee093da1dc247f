/* Loading a checkpoint into a model with different heads or position settings (transfer.h). */
#include "train/model/transfer.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "train/model/checkpoint.h"

#define POSITION_TABLE "bert/embeddings/position_embeddings/weight"

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Whether parameter `name` is the position table of a model in mode `mode` (positions.h: a
 * scheme's table, which a transfer onto a checkpoint without it starts where its term vanishes). */
static int is_scheme_table(RelKind mode, const char *name) {
    const PosScheme *scheme = pos_scheme(mode);
    return scheme->table_scope != POS_TABLE_NONE && ends_with(name, scheme->table_name);
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
            if (is_scheme_table(m->cfg.relative_position, p->name)) { /* a scheme the checkpoint lacks: its
                                                                       * term starts at nothing */
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
    if (table && added) /* what follows from it, with what the checkpoint brought: transfer_note_positions */
        fprintf(table, "  the added relative tables start at %g everywhere (%s)\n", (double)scheme->transfer_identity,
                scheme->transfer_vanishes);
    return s;
}

/* ---- the note: whether step 0 computes the checkpoint model's outputs ------------------------------
 * The scores of a scheme: none q·k; shaw, method1-4 q·k with the layer's distance table; t5 q·k + the
 * shared bucket bias; alibi q·k - m_h |i - j|; rope q·k of rotated q, k. The new model computes the
 * checkpoint's scores only if every term the checkpoint had is still there, read the same way, and
 * every term it adds starts where it vanishes (positions.h: the scheme's transfer facts). Absolute positions and residual
 * attention are terms too. */

/* Appends "; text" (or text) to out. */
static void add_reason(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_reason(char *out, size_t size, const char *fmt, ...) {
    size_t used = strlen(out);
    if (used + 3 >= size)
        return;
    if (used)
        used += (size_t)snprintf(out + used, size - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + used, size - used, fmt, ap);
    va_end(ap);
}

/* The distance table of a truncated scheme: rows x cols of each layer's table. */
static int same_table_shape(const ModelConfig *a, const ModelConfig *b) {
    int da = a->hidden_size / a->num_heads, db = b->hidden_size / b->num_heads;
    return attention_table_rows(a->relative_position, a->relative_k) ==
               attention_table_rows(b->relative_position, b->relative_k) &&
           attention_table_cols(a->relative_position, da) == attention_table_cols(b->relative_position, db);
}

/* The value where the term of mode's table vanishes, or NAN for a mode without a table. */
static float identity_of(RelKind mode) {
    const PosScheme *scheme = pos_scheme(mode);
    return scheme->table_scope != POS_TABLE_NONE ? scheme->transfer_identity : NAN;
}

/* Whether every position table the checkpoint's model has (each layer's distance table, or T5's
 * shared bias) holds `value` everywhere, read from the checkpoint: such a table contributes no term
 * (e.g. methods 1-2's tables as initialised, at 1), so dropping it changes no score. */
static int stored_tables_at(hid_t file, const char *path, const ModelConfig *stored, float value) {
    char name[PARAM_NAME_MAX + 8];
    const PosScheme *scheme = pos_scheme(stored->relative_position);
    const int per_layer = scheme->table_scope == POS_TABLE_LAYER;
    int tables = per_layer ? stored->num_layers : 1, all = 1;
    for (int l = 0; l < tables && all; l++) {
        if (per_layer)
            snprintf(name, sizeof name, "model/bert/encoder/layer/%d/%s", l, scheme->table_name);
        else
            snprintf(name, sizeof name, "model/%s", scheme->table_name);
        hsize_t dims[4];
        int rank = h5_shape(file, path, name, dims);
        size_t count = rank == 2 ? (size_t)(dims[0] * dims[1]) : rank == 1 ? (size_t)dims[0] : 0;
        if (!count || rank > 2)
            return 0;
        float *w = xalloc_floats(count);
        h5_read_floats(file, path, name, w, rank, dims);
        for (size_t e = 0; e < count && all; e++)
            all = w[e] == value;
        free(w);
    }
    return all;
}

/* What the checkpoint's scheme contributed and what happens to it in the new model (S != T):
 * `neutral`, its tables all hold the value where their term vanishes (stored_tables_at). */
static void source_fate(const ModelConfig *now, const ModelConfig *stored, int neutral, char *out, size_t size) {
    const char *from = rel_kind_name(stored->relative_position), *to = rel_kind_name(now->relative_position);
    if (neutral && !(rel_kind_uses_k(now->relative_position) && same_table_shape(now, stored) &&
                     identity_of(now->relative_position) != identity_of(stored->relative_position)))
        return; /* dropped, or read by a formula whose term vanishes at the same value: no term either way */
    const PosScheme *source = pos_scheme(stored->relative_position);
    if (source->adds_nothing)
        return;
    if (source->transfer_lost) { /* a term of its own (and a table the new scheme does not read) */
        add_reason(out, size, "%s", source->transfer_lost);
        return;
    }
    /* a truncated scheme's per-layer distance tables */
    if (rel_kind_uses_k(now->relative_position) && same_table_shape(now, stored))
        add_reason(out, size, "the checkpoint's %s distance tables are loaded into %s's formula, which reads them "
                   "otherwise", from, to);
    else if (rel_kind_uses_k(now->relative_position))
        add_reason(out, size, "the checkpoint's %s distance tables do not fit %s's (the load refuses them)", from, to);
    else
        add_reason(out, size, "the checkpoint's %s distance tables are dropped", from);
}

int transfer_outputs_kept(hid_t file, const char *path, const ModelConfig *now, const ModelConfig *stored, char *why,
                          size_t size) {
    why[0] = '\0';
    char kept[256] = "";
    const RelKind S = stored->relative_position, T = now->relative_position;
    if (now->absolute_position != stored->absolute_position)
        add_reason(why, size, stored->absolute_position ? "the checkpoint's absolute position table is dropped"
                                                        : "an absolute position table is added (randomly initialised)");
    if (now->residual_attention != stored->residual_attention)
        add_reason(why, size, "residual attention is turned %s", now->residual_attention ? "on" : "off");
    else if (now->residual_attention && now->residual_attention_mean != stored->residual_attention_mean)
        add_reason(why, size, "the carried scores are scaled %s",
                   now->residual_attention_mean ? "by 1/layer now" : "by 1 now, not 1/layer");
    if (S == T) {
        if (rel_kind_uses_k(S) && now->relative_k != stored->relative_k)
            add_reason(why, size, "relative_k changes from %d to %d", stored->relative_k, now->relative_k);
        if (S == REL_T5 && (now->t5_num_buckets != stored->t5_num_buckets ||
                            now->t5_max_distance != stored->t5_max_distance))
            add_reason(why, size, "the T5 buckets change (%d buckets to distance %d, were %d to %d): the bias is "
                       "read at other distances", now->t5_num_buckets, now->t5_max_distance, stored->t5_num_buckets,
                       stored->t5_max_distance);
        if (S == REL_ROPE && now->rope_theta != stored->rope_theta)
            add_reason(why, size, "rope_theta changes from %g to %g: every rotation changes",
                       (double)stored->rope_theta, (double)now->rope_theta);
        snprintf(kept, sizeof kept, pos_scheme(S)->adds_nothing ? "the same positions, every parameter loaded"
                                                  : "the same position scheme (%s), its parameters loaded",
                 rel_kind_name(S));
    } else {
        float identity = identity_of(S);
        int neutral = !isnan(identity) && stored_tables_at(file, path, stored, identity);
        source_fate(now, stored, neutral, why, size);
        if (neutral)
            add_reason(kept, sizeof kept, "the checkpoint's %s tables hold %g everywhere, where their term vanishes",
                       rel_kind_name(S), (double)identity);
        const PosScheme *target = pos_scheme(T);
        if (target->transfer_added)
            add_reason(why, size, "%s", target->transfer_added);
        else if (!target->adds_nothing && !(rel_kind_uses_k(S) && rel_kind_uses_k(T) && same_table_shape(now, stored)))
            add_reason(kept, sizeof kept, "the %s %s where %s term vanishes", rel_kind_name(T),
                       target->table_scope == POS_TABLE_MODEL ? "table starts" : "tables start",
                       target->table_scope == POS_TABLE_MODEL ? "its" : "their");
        else if (!kept[0])
            snprintf(kept, sizeof kept, "no position term added or removed");
    }
    if (why[0])
        return 0;
    snprintf(why, size, "%s", kept);
    return 1;
}

void transfer_note_positions(hid_t file, const char *path, const ModelConfig *now, const ModelConfig *stored,
                             const char *outputs, FILE *table) {
    char why[1024], note[1400];
    int kept = transfer_outputs_kept(file, path, now, stored, why, sizeof why);
    snprintf(note, sizeof note, "%s checkpoint -> %s: %s %s the checkpoint model's (%s)",
             rel_kind_name(stored->relative_position), rel_kind_name(now->relative_position), outputs,
             kept ? "are exactly" : "differ from", why);
    rp_log("%s", note);
    if (table)
        fprintf(table, "  %s\n", note);
}
