/* What the schemes truncated at distance k (shaw, methods 1-4) share: the check of k, the vector
 * table [2k+1, d] (row r = clip(i-j, -k, k) + k), and the in-order sum of its slot partials.
 * Conventions (r, r', m, R) in attention_plan.h. */
#include "core/common.h"
#include "layers/attention_plan.h"

void pos_truncated_check(const AttnShape *s) {
    RP_CHECK(s->rel_k >= 1, "attention: relative k must be >= 1, got %d", s->rel_k);
}

void pos_vector_table_shape(const PosDims *dims, int *rows, int *cols) {
    *rows = 2 * dims->rel_k + 1;
    *cols = dims->head_dim;
}

/* The reachable rows k-m .. k+m of d_table += sum over the slots of their [R, d] partial (by r'). */
void pos_vector_table_finish(const AttnPlan *p, float *d_table) {
    const int d = p->d;
    const float *slot = p->slot_grad;
    const size_t stride = p->slot_floats;
    float *d_reach = d_table + (size_t)(p->rel_k - p->m) * d;
    const size_t n = (size_t)p->R * d;
#pragma omp parallel for schedule(static)
    for (size_t e = 0; e < n; e++) {
        float sum = 0.0f;
        for (int s = 0; s < p->slots; s++)
            sum += slot[(size_t)s * stride + e];
        d_reach[e] += sum;
    }
}
