/* ALiBi (Press et al. 2022), symmetric as in MosaicBERT's encoder:
 *   S_ij = scale * q_i.k_j - m_h |i - j|,   no parameters.
 * The bias is added in the score pass of attention.c (bias2, as T5's); it has no gradient. */
#include <math.h>
#include <stdlib.h>

#include "layers/positions.h"

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

void alibi_prepare(const AttnPlan *p) {
    const int L = p->L, W = 2 * L - 1;
    for (int h = 0; h < p->heads; h++) {
        const double slope = alibi_slope(h, p->heads);
        for (int u = 0; u < W; u++)
            p->bias2[(size_t)h * W + u] = (float)(-slope * abs(u - (L - 1)));
    }
}
