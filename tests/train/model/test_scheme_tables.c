/* What the program asks of each position scheme's row (layers/positions.h) against what it does,
 * for every row of the table:
 *   - the checkpoint: a model of the scheme holds exactly its tables (each layer's
 *     bert/encoder/layer/N/<table_name>, or the model's one <table_name>) with the row's shape,
 *     and no other position table; a fresh table is all 1 iff the row says init_ones;
 *   - the config: model.relative_k applies (train/config/schema.c's rows) iff the row's uses_k, and
 *     the settings text of the launch summary and the transfer notes names exactly the keys that apply;
 *   - the model's forward builds the row's length-only tables for the batch's length. */
#include <string.h>

#include "core/common.h"
#include "core/config/config_parse.h"
#include "core/config/config_use.h"
#include "train/config/config.h"
#include "train/model/model.h"
#include "tests/check.h"

enum { H = 16, HEADS = 2, LAYERS = 2, REL_K = 3, BUCKETS = 8, V = 20 };

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Whether a parameter is some scheme's table (by any row's name). */
static int is_position_table(const char *name) {
    for (int k = 0; k < REL_KIND_COUNT; k++) {
        const PosScheme *sc = pos_scheme((RelKind)k);
        if (sc->table_name && ends_with(name, sc->table_name))
            return 1;
    }
    return 0;
}

static void check_model(TestTally *t, RelKind kind) {
    const PosScheme *sc = pos_scheme(kind);
    const char *name = rel_kind_name(kind);
    ModelConfig c = {.hidden_size = H, .num_layers = LAYERS, .num_heads = HEADS, .intermediate_size = 32,
                     .vocab_size = V, .max_position = 16, .type_vocab_size = 2, .absolute_position = 0,
                     .norm = NORM_POST, .layer_norm_eps = 1e-12f, .init_range = 0.3f, .seed = 5,
                     .relative_position = kind, .relative_k = REL_K, .t5_num_buckets = BUCKETS,
                     .t5_max_distance = 6, .rope_theta = 10000.0f};
    Model m;
    model_create(&m, &c, heads_mlm());
    model_init_weights(&m, 3);
    int rows, cols;
    pos_table_shape(kind, &(PosDims){.rel_k = REL_K, .head_dim = H / HEADS, .heads = HEADS, .t5_num_buckets = BUCKETS},
                    &rows, &cols);
    const int expected = sc->table_scope == POS_TABLE_LAYER ? LAYERS : sc->table_scope == POS_TABLE_MODEL;
    int found = 0, shaped = 0, ones = 0, tables = 0;
    for (int l = 0; l < (sc->table_scope == POS_TABLE_LAYER ? LAYERS : expected); l++) {
        char full[PARAM_NAME_MAX];
        if (sc->table_scope == POS_TABLE_LAYER)
            snprintf(full, sizeof full, "bert/encoder/layer/%d/%s", l, sc->table_name);
        else
            snprintf(full, sizeof full, "%s", sc->table_name);
        const ParamInfo *p = model_find_param(&m, full);
        if (!p)
            continue;
        found++;
        shaped += p->rows == rows && (p->cols ? p->cols : 1) == cols;
        int all_one = 1;
        for (size_t e = 0; e < p->count; e++)
            all_one &= m.params[p->offset + e] == 1.0f;
        ones += all_one;
    }
    for (int i = 0; i < m.table.count; i++)
        tables += is_position_table(m.table.items[i].name);
    CHECK(t, found == expected && shaped == expected && tables == expected,
          "%s: the checkpoint holds its %d table(s) of shape [%d, %d] by the row's name, no other (%d found, "
          "%d shaped, %d position tables)", name, expected, rows, cols, found, shaped, tables);
    CHECK(t, ones == (sc->init_ones ? expected : 0), "%s: a fresh table is all 1 iff init_ones (%d of %d)", name,
          ones, expected);

    /* the forward builds the length-only tables for its length */
    enum { B = 2, L = 5 };
    Activations a;
    activations_create(&a, &m, B, 8, 0, PRECISION_FP32);
    int ids[B * L] = {0}, types[B * L] = {0}, mask[B * L];
    for (int n = 0; n < B * L; n++)
        mask[n] = 1, ids[n] = n % V;
    Batch batch = {B, L, ids, types, mask, NULL, NULL};
    model_encode(&m, &a, &batch, FORWARD_EVAL, 0);
    CHECK(t, a.positions.L == L && a.positions.max_L == 8,
          "%s: the forward built its length-only tables for L = %d (laid out for 8)", name, a.positions.L);
    activations_free(&a);
    model_free(&m);
}

static void check_config_rule(TestTally *t, RelKind kind) {
    Config cfg;
    config_defaults(&cfg);
    cfg.model.relative_position = kind;
    const int k = config_key_index(&config_schema, "model", "relative_k");
    bool unused_by_job = false;
    char why[256] = "";
    const bool applies = config_key_applies(&config_schema, &cfg, k, &unused_by_job, why, sizeof why);
    CHECK(t, applies == !!pos_scheme(kind)->uses_k, "%s: model.relative_k applies (%s) iff the row's uses_k (%d)",
          rel_kind_name(kind), applies ? "yes" : why, pos_scheme(kind)->uses_k);
}

/* The settings text (model_position_settings: the launch summary, the transfer notes) names a
 * key's value iff the key applies to the scheme (schema.c's rows): changing the key changes the
 * text exactly then. */
static void check_settings_text(TestTally *t, RelKind kind) {
    static const char *const keys[] = {"relative_k", "t5_num_buckets", "t5_max_distance", "rope_theta"};
    Config cfg;
    config_defaults(&cfg);
    cfg.model.relative_position = kind;
    char base[96], detail[160] = "";
    model_position_settings(&cfg.model, base, sizeof base);
    for (int i = 0; i < 4; i++) {
        Config changed = cfg;
        switch (i) {
        case 0: changed.model.relative_k += 1; break;
        case 1: changed.model.t5_num_buckets += 2; break;
        case 2: changed.model.t5_max_distance += 1; break;
        default: changed.model.rope_theta *= 2.0f;
        }
        char text[96], why[256] = "";
        model_position_settings(&changed.model, text, sizeof text);
        bool unused_by_job = false;
        const bool applies = config_key_applies(&config_schema, &cfg, config_key_index(&config_schema, "model", keys[i]),
                                                &unused_by_job, why, sizeof why);
        if (applies != (strcmp(text, base) != 0))
            snprintf(detail, sizeof detail, "; model.%s %s but the text %s", keys[i], applies ? "applies" : "does not",
                     applies ? "stays" : "changes");
    }
    CHECK(t, !detail[0], "%s: the settings text (\"%s\") names exactly the keys that apply%s", rel_kind_name(kind),
          base, detail);
}

int main(void) {
    TestTally t = {0, 0};
    for (int k = 0; k < REL_KIND_COUNT; k++) {
        check_model(&t, (RelKind)k);
        check_config_rule(&t, (RelKind)k);
        check_settings_text(&t, (RelKind)k);
    }
    return tally_exit(&t);
}
