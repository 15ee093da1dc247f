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

/* The parameters a position mode adds (to each layer, or T5's one table for the encoder), and the
 * value that makes its term of the score vanish (docs/attention.md), so that a model given the mode
 * on top of a checkpoint without it computes the checkpoint model's scores until training moves
 * the table. One row per mode with parameters (alibi and rope have none: their outputs change at
 * step 0, docs/finetune.md). */
static const struct {
    RelKind mode;
    const char *suffix; /* the end of the parameter's name */
    float identity;
    const char *vanishes; /* the term at that value */
} ADDED_TABLES[] = {
    {REL_SHAW, "attention/self/distance_embedding/weight", 0.0f, "q_i·a_r = 0"},
    {REL_METHOD1, "attention/self/distance_embedding/weight", 1.0f, "(q_i·k_j)·w_s = q_i·k_j"},
    {REL_METHOD2, "attention/self/distance_embedding/weight", 1.0f, "(q_i·k_j)·w_r = q_i·k_j"},
    {REL_METHOD3, "attention/self/distance_embedding/weight", 1.0f, "Σ_t q_it k_jt a_rt = q_i·k_j"},
    {REL_METHOD4, "attention/self/distance_embedding/weight", 0.0f, "q_i·a_r + k_j·a_r = 0"},
    {REL_T5, "bert/encoder/relative_attention_bias/weight", 0.0f, "b[bucket(j - i), h] = 0"},
};

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The ADDED_TABLES row of parameter `name` of a model in mode `mode`, or -1. */
static int added_table(RelKind mode, const char *name) {
    for (size_t i = 0; i < sizeof ADDED_TABLES / sizeof *ADDED_TABLES; i++)
        if (ADDED_TABLES[i].mode == mode && ends_with(name, ADDED_TABLES[i].suffix))
            return (int)i;
    return -1;
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
    int added = -1; /* the ADDED_TABLES row of the tables this transfer adds */
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
            int row = added_table(m->cfg.relative_position, p->name);
            if (row >= 0) { /* a mode the checkpoint lacks: its term starts at nothing */
                float *w = m->params + p->offset;
                for (size_t e = 0; e < p->count; e++)
                    w[e] = ADDED_TABLES[row].identity;
                added = row;
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
    if (table && added >= 0) /* what follows from it, with what the checkpoint brought: transfer_note_positions */
        fprintf(table, "  the added relative tables start at %g everywhere (%s)\n",
                (double)ADDED_TABLES[added].identity, ADDED_TABLES[added].vanishes);
    return s;
}

/* ---- the note: whether step 0 computes the checkpoint model's outputs ------------------------------
 * The scores of a scheme: none q·k; shaw, method1-4 q·k with the layer's distance table; t5 q·k + the
 * shared bucket bias; alibi q·k - m_h |i - j|; rope q·k of rotated q, k. The new model computes the
 * checkpoint's scores only if every term the checkpoint had is still there, read the same way, and
 * every term it adds starts where it vanishes (ADDED_TABLES). Absolute positions and residual
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

/* The value where the term of mode's table vanishes (ADDED_TABLES), or NAN for a mode without one. */
static float identity_of(RelKind mode) {
    for (size_t i = 0; i < sizeof ADDED_TABLES / sizeof *ADDED_TABLES; i++)
        if (ADDED_TABLES[i].mode == mode)
            return ADDED_TABLES[i].identity;
    return NAN;
}

/* Whether every position table the checkpoint's model has (each layer's distance table, or T5's
 * shared bias) holds `value` everywhere, read from the checkpoint: such a table contributes no term
 * (e.g. methods 1-2's tables as initialised, at 1), so dropping it changes no score. */
static int stored_tables_at(hid_t file, const char *path, const ModelConfig *stored, float value) {
    char name[PARAM_NAME_MAX + 8];
    int tables = stored->relative_position == REL_T5 ? 1 : stored->num_layers, all = 1;
    for (int l = 0; l < tables && all; l++) {
        if (stored->relative_position == REL_T5)
            snprintf(name, sizeof name, "model/bert/encoder/relative_attention_bias/weight");
        else
            snprintf(name, sizeof name, "model/bert/encoder/layer/%d/attention/self/distance_embedding/weight", l);
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
    switch (stored->relative_position) {
    case REL_NONE: return;
    case REL_T5: add_reason(out, size, "the checkpoint's T5 bias (relative_attention_bias) is dropped"); return;
    case REL_ALIBI: add_reason(out, size, "the checkpoint's ALiBi bias -m_h|i-j| is gone"); return;
    case REL_ROPE: add_reason(out, size, "the checkpoint's rotation of q and k (RoPE) is gone"); return;
    default: /* a truncated scheme's per-layer tables */
        if (rel_kind_uses_k(now->relative_position) && same_table_shape(now, stored))
            add_reason(out, size, "the checkpoint's %s distance tables are loaded into %s's formula, which reads them "
                       "otherwise", from, to);
        else if (rel_kind_uses_k(now->relative_position))
            add_reason(out, size, "the checkpoint's %s distance tables do not fit %s's (the load refuses them)", from,
                       to);
        else
            add_reason(out, size, "the checkpoint's %s distance tables are dropped", from);
    }
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
        snprintf(kept, sizeof kept, S == REL_NONE ? "the same positions, every parameter loaded"
                                                  : "the same position scheme (%s), its parameters loaded",
                 rel_kind_name(S));
    } else {
        float identity = identity_of(S);
        int neutral = !isnan(identity) && stored_tables_at(file, path, stored, identity);
        source_fate(now, stored, neutral, why, size);
        if (neutral)
            add_reason(kept, sizeof kept, "the checkpoint's %s tables hold %g everywhere, where their term vanishes",
                       rel_kind_name(S), (double)identity);
        if (T == REL_ALIBI)
            add_reason(why, size, "ALiBi's bias is added, and it has no parameters that could start at zero");
        else if (T == REL_ROPE)
            add_reason(why, size, "RoPE rotates every q and k, and it has no parameters that could start neutral");
        else if (T != REL_NONE && !(rel_kind_uses_k(S) && rel_kind_uses_k(T) && same_table_shape(now, stored)))
            add_reason(kept, sizeof kept, "the %s %s where %s term vanishes", rel_kind_name(T),
                       T == REL_T5 ? "table starts" : "tables start", T == REL_T5 ? "its" : "their");
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
