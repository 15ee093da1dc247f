/* Evaluation metrics of the GLUE tasks (as scikit-learn and scipy compute them for GLUE). */
#pragma once

/* fraction of pred[i] == gold[i] */
double metric_accuracy(const int *pred, const int *gold, int n);
/* F1 of class `positive`: 2 TP / (2 TP + FP + FN); 0 when there is no positive at all */
double metric_f1(const int *pred, const int *gold, int n, int positive);
/* Matthews correlation over K classes (Gorodkin's R_K; the usual phi for K = 2):
 *   (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2))
 * c correct, s = n, p_k / t_k predicted / true counts of class k; 0 when the denominator is 0. */
double metric_matthews(const int *pred, const int *gold, int n, int num_classes);
/* Pearson correlation; 0 when either variance is 0 */
double metric_pearson(const double *x, const double *y, int n);
/* Spearman correlation: Pearson of the ranks, ties given their average rank */
double metric_spearman(const double *x, const double *y, int n);
