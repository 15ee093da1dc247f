/* Position schemes: one interface, one row per scheme. A scheme is what model.relative_position
 * names: the terms it adds to the attention scores (attention.h gives each formula), the tables
 * it learns, the scratch it needs and the facts the rest of the program asks about it. attention.c
 * calls a scheme only through its row (pos_scheme) and never names one; so do the config checks,
 * the HuggingFace export and import, and the checkpoint transfer under train/.
 *
 *   row           file            terms of S (attention.h)          tables
 *   none          pos_none.c      -                                 -
 *   shaw          pos_shaw.c      q_i.a_r                           [2k+1, d] per layer
 *   method4       pos_shaw.c      q_i.a_r + k_j.a_r                 [2k+1, d] per layer
 *   method1, 2    pos_scalar.c    (q_i.k_j) w_s, (q_i.k_j) w_r      [k+1], [2k+1] per layer
 *   method3       pos_method3.c   sum_t q_it k_jt a_rt              [2k+1, d] per layer
 *   t5            pos_t5.c        + b[bucket(j-i), h]               [buckets, heads] per model
 *   alibi         pos_alibi.c     - m_h |i-j|                       -
 *   rope          pos_rope.c      (R_i q_i).(R_j k_j)               -
 * The truncated family (shaw, methods 1-4) shares pos_truncated.c: the check of k, the table
 * shape [2k+1, d] and the in-order sum of the per-slot partials of such a table.
 *
 * Adding a scheme: a line in POSITION_SCHEMES, its file with its row, its tests, its docs, and its
 * formula in the two oracles that name every scheme on purpose (attention_reference.c, in double;
 * tests/reference/reference.py, PyTorch). */
#pragma once
#include <stddef.h>

#include "core/arena.h"
#include "core/kinds.h"

struct AttnPlan;
struct AttnWork;
struct AttnShape;

/* The schemes in the order of RelKind (the config's values: rel_kind_names). X(KIND, "name", row):
 * row is the scheme's PosScheme, defined in its file. */
#define POSITION_SCHEMES(X)                                                                        \
    X(REL_NONE, "none", pos_none)                                                                  \
    X(REL_SHAW, "shaw", pos_shaw)                                                                  \
    X(REL_METHOD1, "method1", pos_method1)                                                         \
    X(REL_METHOD2, "method2", pos_method2)                                                         \
    X(REL_METHOD3, "method3", pos_method3)                                                         \
    X(REL_METHOD4, "method4", pos_method4)                                                         \
    X(REL_T5, "t5", pos_t5)                                                                        \
    X(REL_ALIBI, "alibi", pos_alibi)                                                               \
    X(REL_ROPE, "rope", pos_rope)

/* RelKind (core/kinds.h, where the config names it): a value of model.relative_position (the key
 * keeps its name: configs and checkpoints), in the order of POSITION_SCHEMES. */
#define POS_ONE(kind, name, row) +1
enum { REL_KIND_COUNT = 0 POSITION_SCHEMES(POS_ONE) };
#undef POS_ONE

/* Their config names in enum order ("none", "shaw", "method1", ...), NULL-terminated. */
extern const char *const rel_kind_names[];
const char *rel_kind_name(RelKind kind);
/* 1 for the schemes truncated at relative_k (the row's uses_k). */
int rel_kind_uses_k(RelKind kind);

/* Tables that depend on the length only (and on the model's shared table, fixed within a step):
 * built once per step and length (pos_tables_build) before the layers, read by every layer's
 * forward and backward. Laid out once for the longest length (pos_tables_lay_out). */
typedef struct PosTables {
    int L;            /* the length they were built for (0: not built yet) */
    int max_L;        /* laid out for lengths up to this */
    float *bias2;     /* [heads, 2L-1] the logit added to head h at j - i = u - (L-1) (index u): row
                       * i of head h reads bias2 + h*(2L-1) + (L-1-i) at columns j */
    float *cos, *sin; /* [L, d/2] rotation of position p (rope) */
} PosTables;

typedef enum { POS_TABLE_NONE, POS_TABLE_LAYER, POS_TABLE_MODEL } PosTableScope;

/* How the scheme's terms meet the core's GEMM q_i.k_j of a (b,h) [L, L]. */
typedef enum {
    POS_QK_PLAIN,  /* S = q_i.k_j (+ bias2 in the score pass); no scores hook */
    POS_QK_ADDED,  /* scores() writes its terms into S first, the GEMM adds q_i.k_j (beta 1) */
    POS_QK_RAW,    /* the GEMM writes raw = q_i.k_j (kept for backward), scores() writes S */
    POS_QK_SCHEME, /* scores() writes the whole S; backward() writes dQ, dK (no q.k GEMMs) */
} PosQkUse;

/* What a table's shape depends on. */
typedef struct {
    int rel_k, head_dim, heads, t5_num_buckets;
} PosDims;

/* One scheme. Hooks left NULL do nothing. Per (b,h) hooks take q, key = the head's rows of qkv
 * (row stride p->ld) through b, h; `part` is the backward's slot partial of the table gradient
 * [p->slot_floats]. */
typedef struct PosScheme {
    /* ---- facts ---- */
    int adds_nothing;             /* no position terms (none: absolute embeddings or nothing) */
    int uses_k;                   /* truncated at model.relative_k: the key applies */
    const char *even_head_width;  /* NULL, or why the head width must be even */
    PosTableScope table_scope;    /* whose table: none, each layer's, one for the model */
    /* checkpoint name of the table: after "bert/encoder/layer/N/" (layer) or whole (model) */
    const char *table_name;
    void (*table_shape)(const PosDims *dims, int *rows, int *cols);
    int init_ones;                /* a fresh table is all 1 (else normal(0, init_range)) */
    /* transfer onto a checkpoint without the table: the value at which its term vanishes, and
     * the term then (train/model/transfer.c's notes). transfer_added: why a switch to this scheme
     * changes step 0's outputs whatever it starts from (a term without parameters), or NULL;
     * transfer_lost: what a model that leaves this scheme loses besides its tables, or NULL */
    float transfer_identity;
    const char *transfer_vanishes, *transfer_added, *transfer_lost;
    /* HuggingFace BERT: its position_embedding_type, or NULL; then hf_lacks (what HF BERT has
     * no layer for) and hf_family (the models that have it), or NULL for the truncated methods
     * HF has no form of */
    const char *hf_type, *hf_lacks, *hf_family;

    /* ---- attention ---- */
    void (*check)(const struct AttnShape *s); /* fatal on parameters the scheme cannot run */
    /* shared scratch from `shared` and p->slot_floats, p->block; one thread's buffers */
    void (*plan)(struct AttnPlan *p, Arena *shared);
    void (*work)(const struct AttnPlan *p, struct AttnWork *w, Arena *arena);
    /* length-only tables: lay out for s->L, build for s->L (table: the model's, or NULL) */
    void (*tables_lay_out)(PosTables *t, const struct AttnShape *s, Arena *arena);
    void (*tables_build)(PosTables *t, const struct AttnShape *s, const float *table);
    /* per call, before the (b,h) loop: the copy of the layer's table its kernels read */
    void (*prepare)(const struct AttnPlan *p, const float *table);
    PosQkUse qk;
    /* q, key := the rows the q.k GEMMs multiply (rope: rotated into the thread's buffer) */
    void (*rotate)(const struct AttnPlan *p, const struct AttnWork *w, const float **q,
                   const float **key, int *ld);
    void (*scores)(const struct AttnPlan *p, const struct AttnWork *w, float *S, const float *raw,
                   const float *qkv, const float *table, int b, int h);
    /* backward: the score pass sums dS along the diagonals u = j-i+L-1 into part + h*(2L-1) */
    int bias_grad;
    /* before the q.k GEMMs: dR -> dL/d(q.k) in place, table gradient from raw (POS_QK_RAW) */
    void (*backward_raw)(const struct AttnPlan *p, float *dscore, float *part, const float *raw);
    /* after them: the scheme's dQ, dK terms into d_qkv, its table gradient into part */
    void (*backward)(const struct AttnPlan *p, const struct AttnWork *w, const float *dscore,
                     float *part, float *d_qkv, const float *qkv, const float *table, int b, int h);
    /* dQ, dK of the unrotated rows (the inverse of rotate) */
    void (*rotate_back)(const struct AttnPlan *p, float *dq, float *dkey, int ld);
    /* after the backward's loop: d_table += the slot partials, summed in a fixed order */
    void (*finish)(const struct AttnPlan *p, float *d_table);
} PosScheme;

#define POS_ROW(kind, name, row) extern const PosScheme row;
POSITION_SCHEMES(POS_ROW)
#undef POS_ROW

/* The row of a scheme (fatal on a kind outside the table). */
const PosScheme *pos_scheme(RelKind kind);

/* The shape of kind's table for these dimensions (0 x 0 without one). */
void pos_table_shape(RelKind kind, const PosDims *dims, int *rows, int *cols);

/* Lay out t for lengths up to s->L from `arena` (measuring or real); build it for s->L <= max_L
 * (table: the model's shared table, or NULL). */
void pos_tables_lay_out(PosTables *t, const struct AttnShape *s, Arena *arena);
void pos_tables_build(PosTables *t, const struct AttnShape *s, const float *table);

/* T5's bidirectional bucket of the relative position rel = j - i (HuggingFace modeling_t5.py,
 * _relative_position_bucket, bidirectional=True), in [0, num_buckets). */
int t5_bucket(int rel, int num_buckets, int max_distance);

/* ALiBi's slope m_h of head h of num_heads (Press et al.'s reference code). */
double alibi_slope(int h, int num_heads);

/* ---- shared by the truncated family (pos_truncated.c) ---- */
void pos_truncated_check(const struct AttnShape *s);          /* k >= 1 */
void pos_vector_table_shape(const PosDims *dims, int *rows, int *cols); /* [2k+1, d] */
/* d_table rows k-m .. k+m += the slot partials [R, d] by r', summed over the slots in order */
void pos_vector_table_finish(const struct AttnPlan *p, float *d_table);
