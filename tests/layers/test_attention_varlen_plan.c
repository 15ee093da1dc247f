/* The unpadded attention's scratch plan made once (attn_varlen_plan, AttnShape.varlen; issue 38):
 *   - an unpadded batch (lengths 1, 8, 5; method4 k = 3, residual, dropout) forward and backward
 *     with the plan made for the layout [3, 8] give the same bits as calls planning their own, for
 *     a batch of the layout's size and a smaller one [2, 6] in the same scratch;
 *   - a call the plan does not cover is refused, naming the sizes: a longer batch (L 9 > 8), more
 *     sequences (4 > 3), another scheme (shaw for method4). */
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "tests/child.h"
#include "tests/layer_testing.h"

enum { B = 3, L = 8, H = 8, HEADS = 2, REL_K = 3 };

static AttnShape layout_shape(const int *offsets) {
    return (AttnShape){.B = B, .L = L, .H = H, .num_heads = HEADS, .rel = REL_METHOD4, .rel_k = REL_K,
                       .residual = 1, .first_layer = 1, .carried_scale = 1.0f, .dropout = 0.1f, .threads = 2,
                       .seq_offsets = offsets};
}

typedef struct {
    AttnShape shape;
} Refused;

static void call_refused(const void *arg) { /* sizes the scratch through the plan, as a call does */
    const Refused *r = arg;
    (void)attention_scratch_floats(&r->shape);
}

/* Forward and backward of the unpadded batch `offsets` [n + 1] (n sequences) on shape s; every
 * output concatenated into out. */
static size_t run(const AttnShape *s, int n, const int *offsets, float *scratch, float *out) {
    Rng rng;
    rng_seed(&rng, 5);
    const int T = offsets[n];
    size_t scores = 0;
    for (int b = 0; b < n; b++)
        scores += (size_t)HEADS * (offsets[b + 1] - offsets[b]) * (offsets[b + 1] - offsets[b]);
    const size_t table_n = (size_t)attention_table_rows(REL_METHOD4, REL_K) * attention_table_cols(REL_METHOD4, H / HEADS);
    float qkv[B * L * 3 * H], table[64 * H], d_ctx[B * L * H];
    for (size_t e = 0; e < (size_t)T * 3 * H; e++)
        qkv[e] = rng_uniform(&rng) - 0.5f;
    for (size_t e = 0; e < table_n; e++)
        table[e] = rng_uniform(&rng) - 0.5f;
    for (size_t e = 0; e < (size_t)T * H; e++)
        d_ctx[e] = rng_uniform(&rng) - 0.5f;
    float *ctx = out, *probs = ctx + (size_t)T * H, *carried = probs + scores, *d_qkv = carried + scores,
          *d_bias = d_qkv + (size_t)T * 3 * H, *d_table = d_bias + 3 * H, *d_carried = d_table + table_n;
    const size_t used = (size_t)(d_carried + scores - out);
    memset(out, 0, used * sizeof *out);
    attention_forward(ctx, probs, NULL, carried, scratch, qkv, table, NULL, s, 77);
    attention_backward(d_qkv, d_bias, d_table, d_carried, scratch, d_ctx, qkv, table, probs, NULL, s, 77);
    return used;
}

int main(void) {
    TestTally t = {0};
    static const int offsets[B + 1] = {0, 1, 9, 14}, small[3] = {0, 4, 10};
    const AttnShape layout = layout_shape(offsets);
    const AttnVarlenPlan plan = attn_varlen_plan(&layout);

    /* refusals first (children are forked before any parallel region) */
    static const int longer[B + 1] = {0, 1, 10, 15}, more[5] = {0, 1, 2, 3, 4};
    Refused cases[3] = {{layout}, {layout}, {layout}};
    cases[0].shape.L = 9, cases[0].shape.seq_offsets = longer;
    cases[1].shape.B = 4, cases[1].shape.seq_offsets = more;
    cases[2].shape.rel = REL_SHAW;
    const char *what[3] = {"a longer batch (L 9 > 8)", "more sequences (4 > 3)", "another scheme (shaw)"};
    const char *expect[3] = {"at most 9 rows", "4 sequences", "another scheme"};
    for (int i = 0; i < 3; i++) {
        cases[i].shape.varlen = &plan;
        ChildResult r = child_run(call_refused, &cases[i]);
        CHECK(&t, WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 && strstr(r.err, expect[i]),
              "an unpadded call the start-up plan does not cover is refused: %s (\"%s\")", what[i], r.err);
    }

    AttnShape planned = layout, own = layout;
    planned.varlen = &plan;
    const size_t floats = attention_scratch_floats(&planned);
    CHECK(&t, floats == attention_scratch_floats(&own),
          "the plan sizes the scratch as a call planning its own (%zu floats)", floats);
    float *scratch_a = xalloc_floats(floats), *scratch_b = xalloc_floats(floats);
    enum { OUT = 8192 };
    float *a = xalloc_floats(OUT), *b = xalloc_floats(OUT);
    size_t n_a = run(&planned, B, offsets, scratch_a, a), n_b = run(&own, B, offsets, scratch_b, b);
    CHECK(&t, n_a == n_b && n_a <= OUT && same_bits(a, b, n_a),
          "lengths 1, 8, 5: forward and backward with the start-up plan = planned per call, bit for bit");
    AttnShape planned_small = planned, own_small = own;
    planned_small.B = own_small.B = 2, planned_small.L = own_small.L = 6;
    planned_small.seq_offsets = own_small.seq_offsets = small;
    n_a = run(&planned_small, 2, small, scratch_a, a), n_b = run(&own_small, 2, small, scratch_b, b);
    CHECK(&t, n_a == n_b && same_bits(a, b, n_a),
          "a smaller batch [2, 6] in the layout's scratch: the start-up plan = planned per call, bit for bit");
    free(scratch_a), free(scratch_b), free(a), free(b);
    return tally_exit(&t);
}
