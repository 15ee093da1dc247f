/* Unpadded batches (train/model/model.h, Batch.offsets) against the padded layout: for every
 * position scheme x residual attention off/on x Post-/Pre-LN, a batch of sequences of lengths
 * 1, 2, k-1, k+1 and L (k = the truncation distance) gives, in a training forward with dropout
 * (the unpadded rows draw the padded rows' masks), the same MLM loss, logits, encoder output
 * and every parameter gradient unpadded as padded to L.
 *
 * Tolerance: the two layouts differ only in fp32 summation order (the softmax sums skip the
 * padded keys' exact zeros, products of other shapes block their sums differently): each
 * tensor's largest difference, relative to its largest magnitude, is at most TOL = 2e-5 (seen:
 * below 4e-6). The
 * worst ratio per scheme is printed (the parity table of issue 38). */
#include <omp.h>
#include <stdio.h>

#include "tests/check.h"
#include "tests/train/model/unpadded_testing.h"

#define TOL 2e-5

int main(void) {
    TestTally t = {0};
    omp_set_num_threads(2);
    Data d;
    make_data(&d, lengths, NSEQ, 17);
    const int T = d.offsets[NSEQ];
    double worst_all = 0.0;
    for (int rel = 0; rel < REL_KIND_COUNT; rel++) {
        double worst = 0.0;
        for (int residual = 0; residual < 2; residual++)
            for (int norm = 0; norm < 2; norm++) {
                const ModelConfig c = config_of((RelKind)rel, residual, (NormKind)norm);
                Result p = run_step(&c, &d, 0, PRECISION_FP32), u = run_step(&c, &d, 1, PRECISION_FP32);
                const Errors e = compare_results(&c, &u, &p, T, KEY_BIAS_FLOORED);
                CHECK(&t, u.M == p.M && e.worst <= TOL,
                      "%s residual %d %s-LN: unpadded = padded (%d predictions): loss %.2g, logits %.2g, "
                      "encoder output %.2g, gradients %.2g (worst %s) <= %g of each tensor's largest",
                      rel_kind_name((RelKind)rel), residual, norm ? "pre" : "post", p.M, e.loss, e.logits,
                      e.hidden, e.grads, e.worst_grad, TOL);
                worst = e.worst > worst ? e.worst : worst;
                result_free(&p), result_free(&u);
            }
        printf("parity %-8s worst %.2e\n", rel_kind_name((RelKind)rel), worst);
        worst_all = worst > worst_all ? worst : worst_all;
    }
    printf("parity all      worst %.2e\n", worst_all);
    return tally_exit(&t);
}
