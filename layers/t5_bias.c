/* T5's relative attention bias (Raffel et al. 2020), bidirectional as in its encoder:
 *   S_ij = scale * q_i.k_j + b[bucket(j - i), h],   b: one [num_buckets, heads] table shared by
 *   every layer (the model lays it out once; each layer's backward adds into its gradient).
 * Forward: the (b,h) loop reads bias2[h] (t5_bias_prepare), added in the score pass of
 * attention.c. Backward: dL/db[c, h] = sum over b and the pairs (i, j) with bucket(j - i) = c of
 * dS_ij; the score pass sums dS along each diagonal u = j - i + L - 1 into a slot partial
 * [heads, 2L-1], and t5_bias_finish maps the diagonals to their buckets. */
#include <math.h>
#include <stdlib.h>

#include "layers/positions.h"

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

void t5_bias_prepare(const AttnPlan *p, const float *table) {
    const int L = p->L, W = 2 * L - 1;
    for (int u = 0; u < W; u++) {
        const int bucket = t5_bucket(u - (L - 1), p->t5_buckets, p->t5_max_distance);
        for (int h = 0; h < p->heads; h++)
            p->bias2[(size_t)h * W + u] = table[(size_t)bucket * p->heads + h];
    }
}

void t5_bias_finish(const AttnPlan *p, float *d_table) {
    const int L = p->L, W = 2 * L - 1;
    const float *slot = p->slot_grad;
    for (int h = 0; h < p->heads; h++)
        for (int u = 0; u < W; u++) {
            float sum = 0.0f;
            for (int s = 0; s < p->slots; s++)
                sum += slot[(size_t)s * p->slot_floats + (size_t)h * W + u];
            const int bucket = t5_bucket(u - (L - 1), p->t5_buckets, p->t5_max_distance);
            d_table[(size_t)bucket * p->heads + h] += sum;
        }
}
