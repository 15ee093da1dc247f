/* T5's relative attention bias (Raffel et al. 2020), bidirectional as in its encoder:
 *   S_ij = scale * q_i.k_j + b[bucket(j - i), h],   b: one [num_buckets, heads] table shared by
 *   every layer (the model lays it out once; each layer's backward adds into its gradient).
 * Forward: the (b,h) loop reads bias2[h] (built once per step and length: the table is fixed
 * within a step), added in the score pass of attention.c. Backward: dL/db[c, h] = sum over b and
 * the pairs (i, j) with bucket(j - i) = c of dS_ij; the score pass sums dS along each diagonal
 * u = j - i + L - 1 into a slot partial [heads, 2L-1], and finish maps the diagonals to their
 * buckets. */
#include <math.h>
#include <stdlib.h>

#include "core/common.h"
#include "layers/attention_plan.h"

/* With nb = num_buckets/2, exact = nb/2 and n = |rel|:
 *   bucket = (rel > 0) nb + (n < exact ? n
 *            : min(nb - 1, exact + floor(log(n / exact) / log(max_distance / exact) (nb - exact))))
 * in float32 as HuggingFace's torch code computes it (torch.log of a float tensor divided by a
 * Python float): the floor is taken of the same float, so the bucket edges agree exactly. */
int t5_bucket(int rel, int num_buckets, int max_distance) {
    const int nb = num_buckets / 2, exact = nb / 2, n = abs(rel);
    const int base = rel > 0 ? nb : 0;
    if (n < exact)
        return base + n;
    const float ratio = logf((float)n / (float)exact) / (float)log((double)max_distance / exact);
    const int large = exact + (int)(ratio * (float)(nb - exact));
    return base + (large < nb - 1 ? large : nb - 1);
}

static void check(const AttnShape *s) {
    RP_CHECK(s->t5_num_buckets >= 4 && s->t5_num_buckets % 2 == 0 && s->t5_max_distance > s->t5_num_buckets / 4,
             "attention: t5 needs an even number of buckets >= 4 and a max distance > buckets/4, got "
             "%d and %d", s->t5_num_buckets, s->t5_max_distance);
}

static void table_shape(const PosDims *dims, int *rows, int *cols) {
    *rows = dims->t5_num_buckets, *cols = dims->heads;
}

static void plan(AttnPlan *p, Arena *shared) {
    (void)shared;
    p->slot_floats = attn_round16((size_t)p->heads * (2 * p->L - 1));
}

static void tables_lay_out(PosTables *t, const AttnShape *s, Arena *arena) {
    t->bias2 = arena_take(arena, (size_t)s->num_heads * (2 * (size_t)s->L - 1));
}

/* bias2[h][u] = b[bucket(u - (L-1)), h] */
static void tables_build(PosTables *t, const AttnShape *s, const float *table) {
    const int L = s->L, W = 2 * L - 1, heads = s->num_heads;
    for (int u = 0; u < W; u++) {
        const int bucket = t5_bucket(u - (L - 1), s->t5_num_buckets, s->t5_max_distance);
        for (int h = 0; h < heads; h++)
            t->bias2[(size_t)h * W + u] = table[(size_t)bucket * heads + h];
    }
}

static void finish(const AttnPlan *p, float *d_table) {
    const int L = p->L, W = 2 * L - 1;
    const float *slot = p->slot_grad;
    for (int h = 0; h < p->heads; h++)
        for (int u = 0; u < W; u++) {
            float sum = 0.0f;
            for (int s = 0; s < p->slots; s++)
                sum += slot[(size_t)s * p->slot_floats + (size_t)h * W + u];
            const int bucket = t5_bucket(u - (L - 1), p->shape->t5_num_buckets, p->shape->t5_max_distance);
            d_table[(size_t)bucket * p->heads + h] += sum;
        }
}

/* A zero table adds nothing to the scores (the transfer's start). */
const PosScheme pos_t5 = {
    .table_scope = POS_TABLE_MODEL,
    .table_name = "bert/encoder/relative_attention_bias/weight",
    .table_shape = table_shape,
    .transfer_identity = 0.0f,
    .transfer_vanishes = "b[bucket(j - i), h] = 0",
    .transfer_lost = "the checkpoint's T5 bias (relative_attention_bias) is dropped",
    .hf_lacks = "bucketed relative attention bias",
    .hf_family = "T5 encoder",
    .check = check,
    .plan = plan,
    .tables_lay_out = tables_lay_out,
    .tables_build = tables_build,
    .qk = POS_QK_PLAIN,
    .bias_grad = 1,
    .finish = finish,
};
