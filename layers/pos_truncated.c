/* What the schemes truncated at distance k (shaw, methods 1-4) share: the check of k and its text, the vector
 * table [2k+1, d] (row r = clip(i-j, -k, k) + k), and the in-order sum of its slot partials.
 * Conventions (r, r', m, R) in attention_plan.h. */
#include <omp.h>
#include <stdio.h>

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
/* d_reach [e] += element e of the slots' partials, summed in slot order. */
static inline void add_slot_sum(const AttnPlan *p, float *d_reach, size_t e) {
    float sum = 0.0f;
    for (int s = 0; s < p->slots; s++)
        sum += p->slot_grad[(size_t)s * p->slot_floats + e];
    d_reach[e] += sum;
}

void pos_vector_table_finish(const AttnPlan *p, float *d_table) {
    float *d_reach = d_table + (size_t)(p->rel_k - p->m) * p->d;
    const size_t n = (size_t)p->R * p->d;
    /* a region only where it has threads (omp_region_worthwhile): nested (an unpadded batch's
     * sequence) or at one thread, the caller alone */
    if (omp_get_level() == 0 && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
        for (size_t e = 0; e < n; e++)
            add_slot_sum(p, d_reach, e);
    } else {
        for (size_t e = 0; e < n; e++)
            add_slot_sum(p, d_reach, e);
    }
}

void pos_truncated_settings(const AttnShape *s, char *out, size_t size) { snprintf(out, size, "k = %d", s->rel_k); }
