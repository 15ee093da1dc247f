/* ALiBi (Press et al. 2022), symmetric as in MosaicBERT's encoder:
 *   S_ij = scale * q_i.k_j - m_h |i - j|,   no parameters.
 * The bias (bias2, built once per step and length) is added in the score pass of attention.c;
 * it has no gradient. */
#include <math.h>
#include <stdlib.h>

#include "layers/attention_plan.h"

/* For n heads a power of 2, m_h = (2^(-8/n))^(h+1). Otherwise, with p = 2^floor(log2 n), the p
 * slopes of p heads followed by the slopes of 2p heads at even positions 0, 2, 4, ..., the first
 * n - p of them: for h >= p, m_h = (2^(-8/(2p)))^(2(h-p)+1). */
double alibi_slope(int h, int num_heads) {
    int p = 1;
    while (2 * p <= num_heads)
        p *= 2;
    if (h < p)
        return pow(2.0, -8.0 / p * (h + 1));
    return pow(2.0, -8.0 / (2 * p) * (2 * (h - p) + 1));
}

static void tables_lay_out(PosTables *t, const AttnShape *s, Arena *arena) {
    t->bias2 = arena_take(arena, (size_t)s->num_heads * (2 * (size_t)s->L - 1));
}

/* bias2[h][u] = -m_h |u - (L-1)| */
static void tables_build(PosTables *t, const AttnShape *s, const float *table) {
    (void)table;
    const int L = s->L, W = 2 * L - 1;
    for (int h = 0; h < s->num_heads; h++) {
        const double slope = alibi_slope(h, s->num_heads);
        for (int u = 0; u < W; u++)
            t->bias2[(size_t)h * W + u] = (float)(-slope * abs(u - (L - 1)));
    }
}

const PosScheme pos_alibi = {
    .transfer_added = "ALiBi's bias is added, and it has no parameters that could start at zero",
    .transfer_lost = "the checkpoint's ALiBi bias -m_h|i-j| is gone",
    .hf_lacks = "linear attention bias",
    .hf_family = "MosaicBERT",
    .tables_lay_out = tables_lay_out,
    .tables_build = tables_build,
    .qk = POS_QK_PLAIN,
};
