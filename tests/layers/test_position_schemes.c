/* The table of position schemes (layers/positions.h), row by row:
 *   - the rows are complete and their facts agree with their hooks: a row with a table has its
 *     shape, name, finish and transfer value; a layer table is non-empty for k >= 1; the q.k use
 *     has the hooks it needs (scores, backward_raw for raw scores); rotate and rotate_back come
 *     together; a bias gradient needs a table and the length-only bias; HF forms are one of
 *     "has a form" or "lacks a layer, of a family";
 *   - the length-only tables built once (AttnShape.tables, as the model's forward does for every
 *     layer) give the same bits as each call building its own, in forward (ctx, probs, carried)
 *     and backward (d_qkv, its bias, d_table, d_carried), at a length shorter than the one the
 *     tables were laid out for, on two threads. The gradients themselves are checked against
 *     the double-precision reference (finite-difference checked) per scheme in test_attention. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/positions.h"
#include "tests/check.h"

enum { B = 2, L = 9, MAX_L = 13, H = 16, HEADS = 2, D = H / HEADS, REL_K = 3, BUCKETS = 8 };

static void check_facts(TestTally *t, RelKind kind) {
    const PosScheme *sc = pos_scheme(kind);
    const char *name = rel_kind_name(kind);
    int rows, cols;
    pos_table_shape(kind, &(PosDims){.rel_k = REL_K, .head_dim = D, .heads = HEADS, .t5_num_buckets = BUCKETS},
                    &rows, &cols);
    const int has_table = sc->table_scope != POS_TABLE_NONE;
    CHECK(t, name && !strcmp(rel_kind_names[kind], name), "%s: row %d is named in rel_kind_names", name,
          (int)kind);
    CHECK(t, has_table == (rows > 0 && cols > 0) && has_table == !!sc->table_name &&
                 has_table == !!sc->finish && has_table == !!sc->transfer_vanishes,
          "%s: a table (%d x %d) iff a checkpoint name, a finish and a transfer value", name, rows, cols);
    CHECK(t, !has_table || (sc->table_scope == POS_TABLE_MODEL) == !strncmp(sc->table_name, "bert/", 5),
          "%s: a model table's name is whole (bert/...), a layer's is relative to its layer", name);
    CHECK(t, (sc->table_scope == POS_TABLE_LAYER) == (attention_table_rows(kind, REL_K) > 0),
          "%s: attention_table_rows is the layer table's", name);
    CHECK(t, !sc->uses_k || (sc->table_scope == POS_TABLE_LAYER && sc->check),
          "%s: a scheme truncated at k has a layer table and checks k", name);
    CHECK(t, (sc->qk == POS_QK_PLAIN) == !sc->scores && (sc->qk == POS_QK_RAW) == !!sc->backward_raw &&
                 (sc->qk != POS_QK_SCHEME || sc->backward),
          "%s: the q.k use (%d) has its hooks (scores, backward_raw for raw, backward for whole S)", name,
          (int)sc->qk);
    CHECK(t, !!sc->rotate == !!sc->rotate_back, "%s: rotate iff rotate_back", name);
    CHECK(t, !!sc->tables_lay_out == !!sc->tables_build, "%s: length-only tables laid out iff built", name);
    CHECK(t, !sc->bias_grad || (has_table && sc->tables_build),
          "%s: a bias gradient has a table and a length-only bias", name);
    CHECK(t, sc->hf_type ? !sc->hf_lacks && !sc->hf_family : !!sc->hf_lacks == !!sc->hf_family,
          "%s: an HF form, or what HF lacks and the family that has it (or neither: a truncated method)", name);
    CHECK(t, !sc->adds_nothing || (!has_table && sc->qk == POS_QK_PLAIN && !sc->tables_build && !sc->rotate),
          "%s: a scheme that adds nothing has no table, terms, bias or rotation", name);
}

typedef struct {
    float *ctx, *probs, *raw, *carried, *d_qkv, *d_bias, *d_table, *d_carried;
} Outputs;

static Outputs outputs(size_t table) {
    const size_t scores = (size_t)B * HEADS * L * L;
    return (Outputs){xalloc_floats((size_t)B * L * H), xalloc_floats(scores), xalloc_floats(scores),
                     xalloc_floats(scores),          xalloc_floats((size_t)B * L * 3 * H),
                     xalloc_floats(3 * H),           xalloc_floats(table + 1),
                     xalloc_floats(scores)};
}

static void outputs_free(Outputs *o) {
    float *all[] = {o->ctx, o->probs, o->raw, o->carried, o->d_qkv, o->d_bias, o->d_table, o->d_carried};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* One forward and backward of layer 1 (carried scores from a layer 0) with the shape's tables. */
static void run(Outputs *o, const AttnShape *s, const float *qkv, const float *table, const float *d_ctx,
                const int *mask, size_t table_floats) {
    const size_t scores = (size_t)B * HEADS * L * L;
    float *scratch = xalloc_floats(attention_scratch_floats(s));
    for (size_t e = 0; e < scores; e++)
        o->carried[e] = (float)((e * 7919u) % 101) / 101.0f - 0.5f, o->d_carried[e] = (float)(e % 5) * 0.01f;
    memset(o->d_bias, 0, 3 * H * sizeof(float));
    memset(o->d_table, 0, (table_floats + 1) * sizeof(float));
    attention_forward(o->ctx, o->probs, o->raw, o->carried, scratch, qkv, table, mask, s, 17);
    attention_backward(o->d_qkv, o->d_bias, table_floats ? o->d_table : NULL, o->d_carried, scratch, d_ctx, qkv,
                       table, o->probs, o->raw, s, 17);
    free(scratch);
}

static int same(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

static void check_tables_once(TestTally *t, RelKind kind) {
    const PosScheme *sc = pos_scheme(kind);
    AttnShape s = {.B = B, .L = L, .H = H, .num_heads = HEADS, .rel = kind, .rel_k = REL_K, .residual = 1,
                   .first_layer = 0, .carried_scale = 0.5f, .dropout = 0.1f, .threads = 2,
                   .t5_num_buckets = BUCKETS, .t5_max_distance = 6, .rope_theta = 100.0f};
    int rows, cols;
    pos_table_shape(kind, &(PosDims){.rel_k = REL_K, .head_dim = D, .heads = HEADS, .t5_num_buckets = BUCKETS},
                    &rows, &cols);
    const size_t table_floats = (size_t)rows * cols, n_qkv = (size_t)B * L * 3 * H;
    Rng rng;
    rng_seed(&rng, 40 + (uint64_t)kind);
    float *qkv = xalloc_floats(n_qkv), *table = xalloc_floats(table_floats + 1);
    float *d_ctx = xalloc_floats((size_t)B * L * H);
    int mask[B * L];
    for (size_t e = 0; e < n_qkv; e++)
        qkv[e] = (float)rng_normal(&rng);
    for (size_t e = 0; e < table_floats; e++)
        table[e] = (float)(rng_normal(&rng) * 0.5 + sc->init_ones);
    for (size_t e = 0; e < (size_t)B * L * H; e++)
        d_ctx[e] = (float)rng_normal(&rng);
    for (int n = 0; n < B * L; n++)
        mask[n] = !(n / L == 1 && n % L >= L - 3);

    Outputs own = outputs(table_floats), once = outputs(table_floats);
    run(&own, &s, qkv, table, d_ctx, mask, table_floats);
    /* the tables laid out for MAX_L, built for L, as the model does */
    AttnShape longest = s;
    longest.L = MAX_L;
    Arena measure = arena_measuring();
    PosTables tables;
    pos_tables_lay_out(&tables, &longest, &measure);
    Arena arena;
    arena_allocate(&arena, measure.used + 1, "test tables");
    pos_tables_lay_out(&tables, &longest, &arena);
    pos_tables_build(&tables, &s, sc->table_scope == POS_TABLE_MODEL ? table : NULL);
    AttnShape with = s;
    with.tables = &tables;
    run(&once, &with, qkv, table, d_ctx, mask, table_floats);

    const size_t scores = (size_t)B * HEADS * L * L;
    CHECK(t, same(own.ctx, once.ctx, (size_t)B * L * H) && same(own.probs, once.probs, scores) &&
                 same(own.carried, once.carried, scores),
          "%s: forward with the tables built once = each call building its own (bits)", rel_kind_name(kind));
    CHECK(t, same(own.d_qkv, once.d_qkv, n_qkv) && same(own.d_bias, once.d_bias, 3 * H) &&
                 same(own.d_table, once.d_table, table_floats) && same(own.d_carried, once.d_carried, scores),
          "%s: backward likewise (d_qkv, its bias, d_table [%zu], d_carried)", rel_kind_name(kind), table_floats);
    arena_free(&arena);
    outputs_free(&own);
    outputs_free(&once);
    free(qkv);
    free(table);
    free(d_ctx);
}

int main(void) {
    TestTally t = {0, 0};
    omp_set_num_threads(2);
    int named = 0;
    while (rel_kind_names[named])
        named++;
    CHECK(&t, named == REL_KIND_COUNT, "rel_kind_names has a name for each of the %d rows (%d)", REL_KIND_COUNT,
          named);
    for (int k = 0; k < REL_KIND_COUNT; k++)
        check_facts(&t, (RelKind)k);
    for (int k = 0; k < REL_KIND_COUNT; k++)
        check_tables_once(&t, (RelKind)k);
    return tally_exit(&t);
}
