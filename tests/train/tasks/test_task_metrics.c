/* GLUE metrics against hand-computed values (train/tasks/task_metrics.c). */
#include <math.h>

#include "train/tasks/task_metrics.h"
#include "tests/check.h"

static int near(double a, double b) { return fabs(a - b) < 1e-6; }

int main(void) {
    TestTally t = {0, 0};
    int pred[5] = {1, 1, 0, 0, 1}, gold[5] = {1, 0, 0, 1, 1};
    /* TP 2, TN 1, FP 1, FN 1 */
    CHECK(&t, near(metric_accuracy(pred, gold, 5), 0.6), "accuracy 3/5");
    CHECK(&t, near(metric_f1(pred, gold, 5, 1), 4.0 / 6.0), "F1 of class 1 = 2TP / (2TP + FP + FN) = 4/6");
    CHECK(&t, near(metric_f1(pred, gold, 5, 0), 2.0 / 4.0), "F1 of class 0 = 2/4");
    CHECK(&t, near(metric_matthews(pred, gold, 5, 2), 1.0 / 6.0), "Matthews (TP TN - FP FN) / sqrt(...) = 1/6");
    int all_one[4] = {1, 1, 1, 1}, mixed[4] = {0, 1, 0, 1};
    CHECK(&t, metric_matthews(all_one, mixed, 4, 2) == 0, "Matthews of a constant prediction is 0");
    CHECK(&t, near(metric_matthews(mixed, mixed, 4, 2), 1.0), "Matthews of a perfect prediction is 1");
    int pred3[4] = {0, 1, 2, 2}, gold3[4] = {0, 1, 1, 2};
    CHECK(&t, near(metric_matthews(pred3, gold3, 4, 3), 0.7), "Matthews over 3 classes (12 - 5) / 10 = 0.7");
    double x[3] = {1, 2, 3}, y[3] = {2, 4, 7};
    CHECK(&t, near(metric_pearson(x, y, 3), 5.0 / sqrt(2.0 * 38.0 / 3.0)), "Pearson 5 / sqrt(2 * 38/3)");
    double xt[4] = {1, 2, 2, 3}, yt[4] = {1, 3, 2, 4};
    CHECK(&t, near(metric_spearman(xt, yt, 4), 4.5 / sqrt(4.5 * 5.0)),
          "Spearman with a tie (average ranks 1, 2.5, 2.5, 4) = 4.5 / sqrt(22.5)");
    double up[5] = {0.1, 0.5, 0.2, 9, 3}, mono[5] = {1, 3, 2, 50, 4};
    CHECK(&t, near(metric_spearman(up, mono, 5), 1.0), "Spearman of a monotone relation is 1");
    double flat[3] = {1, 1, 1};
    CHECK(&t, metric_pearson(flat, y, 3) == 0, "Pearson with zero variance is 0");
    return tally_exit(&t);
}
