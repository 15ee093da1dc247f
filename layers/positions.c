/* The table of position schemes (positions.h): one row per scheme, indexed by RelKind, and what
 * the rest of the program asks of a scheme by its kind. */
#include "layers/positions.h"

#include "core/common.h"
#include "layers/attention_shape.h"

const char *const rel_kind_names[] = {
#define POS_NAME(kind, name, row) name,
    POSITION_SCHEMES(POS_NAME)
#undef POS_NAME
    NULL};

static const PosScheme *const schemes[] = {
#define POS_ROW_ADDRESS(kind, name, row) [kind] = &row,
    POSITION_SCHEMES(POS_ROW_ADDRESS)
#undef POS_ROW_ADDRESS
};

const PosScheme *pos_scheme(RelKind kind) {
    RP_CHECK((int)kind >= 0 && (int)kind < (int)REL_KIND_COUNT, "internal: position scheme %d (expected 0 .. %d)",
             (int)kind, REL_KIND_COUNT - 1);
    return schemes[kind];
}

const char *rel_kind_name(RelKind kind) { return enum_name(rel_kind_names, (int)kind); }

int rel_kind_uses_k(RelKind kind) { return pos_scheme(kind)->uses_k; }

void pos_table_shape(RelKind kind, const PosDims *dims, int *rows, int *cols) {
    const PosScheme *sc = pos_scheme(kind);
    *rows = *cols = 0;
    if (sc->table_shape)
        sc->table_shape(dims, rows, cols);
}

void pos_tables_lay_out(PosTables *t, const AttnShape *s, Arena *arena) {
    const PosScheme *sc = pos_scheme(s->rel);
    *t = (PosTables){.max_L = s->L};
    if (sc->tables_lay_out)
        sc->tables_lay_out(t, s, arena);
}

void pos_tables_build(PosTables *t, const AttnShape *s, const float *table) {
    const PosScheme *sc = pos_scheme(s->rel);
    RP_CHECK(s->L >= 1 && s->L <= t->max_L, "internal: position tables for length %d, laid out for %d", s->L,
             t->max_L);
    if (sc->tables_build)
        sc->tables_build(t, s, table);
    t->L = s->L;
}
