/* GLUE metrics (task_metrics.h). */
#include "train/tasks/task_metrics.h"

#include <math.h>
#include <stdlib.h>

#include "core/common.h"

double metric_accuracy(const int *pred, const int *gold, int n) {
    int hits = 0;
    for (int i = 0; i < n; i++)
        hits += pred[i] == gold[i];
    return n ? (double)hits / n : 0;
}

double metric_f1(const int *pred, const int *gold, int n, int positive) {
    long tp = 0, fp = 0, fn = 0;
    for (int i = 0; i < n; i++) {
        tp += pred[i] == positive && gold[i] == positive;
        fp += pred[i] == positive && gold[i] != positive;
        fn += pred[i] != positive && gold[i] == positive;
    }
    return tp ? 2.0 * tp / (double)(2 * tp + fp + fn) : 0;
}

double metric_matthews(const int *pred, const int *gold, int n, int num_classes) {
    double *p = xcalloc((size_t)num_classes, sizeof(double)), *t = xcalloc((size_t)num_classes, sizeof(double));
    double c = 0, s = n, pt = 0, pp = 0, tt = 0;
    for (int i = 0; i < n; i++) {
        p[pred[i]]++;
        t[gold[i]]++;
        c += pred[i] == gold[i];
    }
    for (int k = 0; k < num_classes; k++) {
        pt += p[k] * t[k];
        pp += p[k] * p[k];
        tt += t[k] * t[k];
    }
    free(p);
    free(t);
    double denominator = sqrt((s * s - pp) * (s * s - tt));
    return denominator > 0 ? (c * s - pt) / denominator : 0;
}

double metric_pearson(const double *x, const double *y, int n) {
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

typedef struct {
    double value;
    int index;
} Ranked;

static int by_value(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    return x->value < y->value ? -1 : x->value > y->value ? 1 : x->index - y->index;
}

/* 1-based ranks; a run of equal values shares the mean of the ranks it spans */
static void average_ranks(const double *x, int n, double *rank) {
    Ranked *r = xmalloc(sizeof(Ranked) * (size_t)n);
    for (int i = 0; i < n; i++)
        r[i] = (Ranked){x[i], i};
    qsort(r, (size_t)n, sizeof *r, by_value);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && r[j + 1].value == r[i].value)
            j++;
        for (int k = i; k <= j; k++)
            rank[r[k].index] = (i + j) / 2.0 + 1;
        i = j + 1;
    }
    free(r);
}

double metric_spearman(const double *x, const double *y, int n) {
    double *rx = xmalloc(sizeof(double) * (size_t)n), *ry = xmalloc(sizeof(double) * (size_t)n);
    average_ranks(x, n, rx);
    average_ranks(y, n, ry);
    double rho = metric_pearson(rx, ry, n);
    free(rx);
    free(ry);
    return rho;
}
