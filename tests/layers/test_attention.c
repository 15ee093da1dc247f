/* Attention (layers/attention.c, relpos.c, attention_plan.c) against the reference of
 * layers/attention_reference.c (the formulas of attention.h element by element, in double), and
 * the reference against finite differences. For every mode x {plain, residual over 3 layers with
 * carried_scale 1 and 1/l}, the carried buffer threaded through the forward calls and back
 * through the backward calls, d_ctx_l = G_l fixed random (loss sum_l sum ctx_l (.) G_l):
 *   - the fast forward's ctx and probs equal the reference's;
 *   - the fast d_qkv, d_table and d_carried equal the reference backward's, and the fast
 *     d_qkv_bias (summed per (b,h) inside the backward) the column sums of the fast d_qkv;
 *   - the reference's d_qkv and d_table equal central differences of the reference loss;
 *   - k both below and above L-1, padding keys, dropout cases, and L = 36 where the relative
 *     terms run in several row blocks (block = 32 rows at this L), and L = 64, k = 70, whose
 *     QA / KA blocks reach a quarter fewer table rows than all of them (the plan's choice of
 *     blocks checked).
 * t5, alibi and rope run the same cases (t5: 8 buckets, max distance L/2 + 2, so that clipped
 * buckets are reached; rope: theta 100, so that small heads turn by several radians); their own
 * conventions (HF's buckets, Press's slopes, rotations) are checked in test_positions.c.
 * Also: the table row used for (i, j) is i-j+k (HuggingFace's relative_key[_query] at k >= L-1),
 * d_table and d_qkv_bias accumulate, d_qkv is overwritten, and results (d_qkv_bias too) are
 * bit-identical with 1 and 2 threads. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/attention_plan.h"
#include "layers/attention_reference.h"
#include "tests/check.h"

#define MAX_LAYERS 3
#define T5_BUCKETS 8
static const double FD_STEP = 1e-5;  /* central differences of the double reference */
static const double FD_TOL = 1e-6;   /* reference gradient vs finite differences (double) */
static const double FAST_TOL = 1e-5; /* fast (float) vs reference, relative to max |reference| */

typedef struct {
    RelKind rel;
    int B, L, H, heads, rel_k;
    int residual, mean, layers; /* mean: carried_scale = 1/l */
    float dropout;
} Case;

/* Inputs of a case: per layer qkv, table, G; one padding mask. */
typedef struct {
    size_t n_qkv, n_table, n_ctx, n_sq;
    float *qkv[MAX_LAYERS], *table[MAX_LAYERS], *G[MAX_LAYERS];
    int *mask;
} Inputs;

/* What a run of the layers gives: per layer ctx, probs (forward), d_qkv, d_qkv_bias, d_table
 * (backward), and d_carried after the last backward call (dL/dC_1; residual only). */
typedef struct {
    float *ctx[MAX_LAYERS], *probs[MAX_LAYERS], *d_qkv[MAX_LAYERS], *d_table[MAX_LAYERS];
    float *d_bias[MAX_LAYERS];
    float *d_carried;
} FastRun;

typedef struct {
    double *ctx[MAX_LAYERS], *probs[MAX_LAYERS], *d_qkv[MAX_LAYERS], *d_table[MAX_LAYERS];
    double *d_carried;
} RefRun;

static uint64_t layer_key(int l) { return hash_key(77, 3, (uint64_t)l * 8 + 1); }

static AttnShape layer_shape(const Case *c, int l) {
    return (AttnShape){.B = c->B, .L = c->L, .H = c->H, .num_heads = c->heads, .rel = c->rel,
                       .rel_k = c->rel_k, .residual = c->residual, .first_layer = l == 0,
                       .carried_scale = c->mean ? 1.0f / (float)(l + 1) : 1.0f,
                       .dropout = c->dropout, .threads = omp_get_max_threads(),
                       .t5_num_buckets = T5_BUCKETS, .t5_max_distance = c->L / 2 + 2,
                       .rope_theta = 100.0f};
}

static float *random_floats(Rng *rng, size_t n, double mean, double sd) {
    float *x = xalloc_floats(n ? n : 1);
    for (size_t e = 0; e < n; e++)
        x[e] = (float)(mean + sd * rng_normal(rng));
    return x;
}

static Inputs make_inputs(const Case *c, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    const int d = c->H / c->heads;
    const int scalar = c->rel == REL_METHOD1 || c->rel == REL_METHOD2;
    Inputs x = {.n_qkv = (size_t)c->B * c->L * 3 * c->H, .n_ctx = (size_t)c->B * c->L * c->H,
                .n_sq = (size_t)c->B * c->heads * c->L * c->L};
    x.n_table = c->rel == REL_T5 ? (size_t)T5_BUCKETS * c->heads
                                 : (size_t)attention_table_rows(c->rel, c->rel_k) * attention_table_cols(c->rel, d);
    for (int l = 0; l < c->layers; l++) {
        x.qkv[l] = random_floats(&rng, x.n_qkv, 0.0, 1.0);
        x.table[l] = random_floats(&rng, x.n_table, scalar ? 1.0 : 0.0, 0.5);
        x.G[l] = random_floats(&rng, x.n_ctx, 0.0, 1.0);
    }
    x.mask = xmalloc((size_t)c->B * c->L * sizeof(int));
    for (int b = 0; b < c->B; b++) /* batch row b has its last b*2 (at most L/2) keys padded */
        for (int i = 0; i < c->L; i++)
            x.mask[b * c->L + i] = i < c->L - (2 * b < c->L / 2 ? 2 * b : c->L / 2);
    return x;
}

static void free_inputs(Inputs *x, int layers) {
    for (int l = 0; l < layers; l++) {
        free(x->qkv[l]);
        free(x->table[l]);
        free(x->G[l]);
    }
    free(x->mask);
}

static double *to_doubles(const float *v, size_t n) {
    double *y = xmalloc((n ? n : 1) * sizeof(double));
    for (size_t e = 0; e < n; e++)
        y[e] = v[e];
    return y;
}

/* ---- fast path and reference, through the layers ----------------------------------------- */

/* Forward through the layers, then backward with d_ctx_l = G_l (d_table starts at 0 and
 * accumulates; d_qkv starts as NaN). */
static FastRun run_fast(const Case *c, const Inputs *x) {
    FastRun run = {0};
    AttnShape s = layer_shape(c, 0);
    float *scratch = xalloc_floats(attention_scratch_floats(&s));
    float *raw[MAX_LAYERS], *carried = xalloc_floats(x->n_sq);
    run.d_carried = xcalloc(x->n_sq, sizeof(float));
    for (int l = 0; l < c->layers; l++) {
        s = layer_shape(c, l);
        run.ctx[l] = xalloc_floats(x->n_ctx);
        run.probs[l] = xalloc_floats(x->n_sq);
        raw[l] = xalloc_floats(x->n_sq);
        attention_forward(run.ctx[l], run.probs[l], raw[l], c->residual ? carried : NULL, scratch,
                          x->qkv[l], x->table[l], x->mask, &s, layer_key(l));
    }
    for (int l = c->layers - 1; l >= 0; l--) {
        s = layer_shape(c, l);
        run.d_qkv[l] = xalloc_floats(x->n_qkv);
        run.d_table[l] = xcalloc(x->n_table ? x->n_table : 1, sizeof(float));
        run.d_bias[l] = xcalloc(3 * (size_t)c->H, sizeof(float));
        for (size_t e = 0; e < x->n_qkv; e++)
            run.d_qkv[l][e] = NAN;
        attention_backward(run.d_qkv[l], run.d_bias[l], c->rel ? run.d_table[l] : NULL,
                           c->residual ? run.d_carried : NULL, scratch, x->G[l], x->qkv[l],
                           x->table[l], run.probs[l], raw[l], &s, layer_key(l));
    }
    for (int l = 0; l < c->layers; l++)
        free(raw[l]);
    free(carried);
    free(scratch);
    return run;
}

static void free_fast(FastRun *run, int layers) {
    for (int l = 0; l < layers; l++)
        free(run->ctx[l]), free(run->probs[l]), free(run->d_qkv[l]), free(run->d_table[l]),
            free(run->d_bias[l]);
    free(run->d_carried);
}

/* The reference's forward through the layers; returns sum_l sum ctx_l (.) G_l. With `run`, also
 * its ctx and probs, then the reference backward's gradients. */
static double run_reference(const Case *c, const Inputs *x, double *const *qkv,
                            double *const *table, RefRun *run) {
    double *carried = xcalloc(x->n_sq, sizeof(double)), *ctx = xmalloc(x->n_ctx * sizeof(double));
    double *probs[MAX_LAYERS], loss = 0.0;
    for (int l = 0; l < c->layers; l++) {
        const AttnShape s = layer_shape(c, l);
        probs[l] = xmalloc(x->n_sq * sizeof(double));
        attention_reference_forward(ctx, probs[l], carried, qkv[l], table[l], x->mask, &s,
                                    layer_key(l));
        for (size_t e = 0; e < x->n_ctx; e++)
            loss += ctx[e] * x->G[l][e];
        if (run)
            run->ctx[l] = memcpy(xmalloc(x->n_ctx * sizeof(double)), ctx, x->n_ctx * sizeof(double));
    }
    if (run) {
        run->d_carried = xcalloc(x->n_sq, sizeof(double));
        for (int l = c->layers - 1; l >= 0; l--) {
            const AttnShape s = layer_shape(c, l);
            double *G = to_doubles(x->G[l], x->n_ctx);
            run->d_qkv[l] = xmalloc(x->n_qkv * sizeof(double));
            run->d_table[l] = xcalloc(x->n_table ? x->n_table : 1, sizeof(double));
            attention_reference_backward(run->d_qkv[l], run->d_table[l], run->d_carried, G,
                                         qkv[l], table[l], probs[l], &s, layer_key(l));
            free(G);
        }
    }
    for (int l = 0; l < c->layers; l++) {
        if (run)
            run->probs[l] = probs[l];
        else
            free(probs[l]);
    }
    free(carried);
    free(ctx);
    return loss;
}

static void free_ref(RefRun *run, int layers) {
    for (int l = 0; l < layers; l++)
        free(run->ctx[l]), free(run->probs[l]), free(run->d_qkv[l]), free(run->d_table[l]);
    free(run->d_carried);
}

/* Central differences of the reference loss with respect to every element of v[0 .. n). */
static void fd_grad(double *fd, double *v, size_t n, const Case *c, const Inputs *x,
                    double *const *qkv, double *const *table) {
    for (size_t e = 0; e < n; e++) {
        const double keep = v[e];
        v[e] = keep + FD_STEP;
        const double up = run_reference(c, x, qkv, table, NULL);
        v[e] = keep - FD_STEP;
        const double down = run_reference(c, x, qkv, table, NULL);
        v[e] = keep;
        fd[e] = (up - down) / (2.0 * FD_STEP);
    }
}

/* max |a - b| over [lo, hi) / max(|b| over [0, n)) (NaN in a propagates, failing every "<") */
static double max_abs(const double *v, size_t lo, size_t hi) {
    double m = 1e-30;
    for (size_t e = lo; e < hi; e++)
        m = fmax(m, fabs(v[e]));
    return m;
}

static double err_f(const float *a, const double *b, size_t lo, size_t hi, double scale) {
    double err = 0.0;
    for (size_t e = lo; e < hi; e++) {
        const double diff = fabs(a[e] - b[e]);
        err = diff > err || isnan(diff) ? diff : err;
    }
    return err / scale;
}

static double err_d(const double *a, const double *b, size_t n) {
    double err = 0.0;
    for (size_t e = 0; e < n; e++)
        err = fmax(err, fabs(a[e] - b[e]));
    return err / max_abs(b, 0, n);
}

static void check_case(TestTally *t, const Case *c, uint64_t seed) {
    char name[160];
    char k_text[16] = "";
    if (rel_kind_uses_k(c->rel))
        snprintf(k_text, sizeof k_text, " k=%d", c->rel_k);
    snprintf(name, sizeof name, "%s%s B=%d L=%d H=%d heads=%d %s dropout=%g",
             rel_kind_name(c->rel), k_text, c->B, c->L, c->H, c->heads,
             !c->residual ? "plain" : c->mean ? "residual(1/l)" : "residual(1)",
             (double)c->dropout);
    if (c->residual)
        snprintf(name + strlen(name), sizeof name - strlen(name), " layers=%d", c->layers);
    Inputs x = make_inputs(c, seed);
    const int d = c->H / c->heads;
    double *qkv[MAX_LAYERS], *table[MAX_LAYERS];
    for (int l = 0; l < c->layers; l++) {
        qkv[l] = to_doubles(x.qkv[l], x.n_qkv);
        table[l] = c->rel ? to_doubles(x.table[l], x.n_table) : NULL;
    }
    FastRun fast = run_fast(c, &x);
    RefRun ref = {0};
    run_reference(c, &x, qkv, table, &ref);

    double fwd = 0.0, gq = 0.0, gt = 0.0, fdq = 0.0, fdt = 0.0, edge = 0.0, edge_size = INFINITY;
    double gb = 0.0;
    const size_t n_bias = 3 * (size_t)c->H, rows = (size_t)c->B * c->L;
    double *column_sums = xmalloc(n_bias * sizeof(double));
    for (int l = 0; l < c->layers; l++) {
        for (size_t col = 0; col < n_bias; col++) { /* the unfused bias gradient, in double */
            column_sums[col] = 0.0;
            for (size_t n = 0; n < rows; n++)
                column_sums[col] += fast.d_qkv[l][n * n_bias + col];
        }
        gb = fmax(gb, err_f(fast.d_bias[l], column_sums, 0, n_bias, max_abs(column_sums, 0, n_bias)));
        fwd = fmax(fwd, err_f(fast.ctx[l], ref.ctx[l], 0, x.n_ctx, max_abs(ref.ctx[l], 0, x.n_ctx)));
        fwd = fmax(fwd, err_f(fast.probs[l], ref.probs[l], 0, x.n_sq, 1.0));
        gq = fmax(gq, err_f(fast.d_qkv[l], ref.d_qkv[l], 0, x.n_qkv,
                            max_abs(ref.d_qkv[l], 0, x.n_qkv)));
        double *fd = xmalloc((x.n_qkv + x.n_table + 1) * sizeof(double));
        fd_grad(fd, qkv[l], x.n_qkv, c, &x, qkv, table);
        fdq = fmax(fdq, err_d(ref.d_qkv[l], fd, x.n_qkv));
        if (x.n_table) {
            const double *rt = ref.d_table[l];
            const double s = max_abs(rt, 0, x.n_table);
            gt = fmax(gt, err_f(fast.d_table[l], rt, 0, x.n_table, s));
            fd_grad(fd, table[l], x.n_table, c, &x, qkv, table);
            fdt = fmax(fdt, err_d(rt, fd, x.n_table));
            /* clipped edge rows: the last row, and row 0 (not for method1, where it is s = 0) */
            const size_t w = (size_t)attention_table_cols(c->rel, d), last = x.n_table - w;
            const int row0 = c->rel != REL_METHOD1;
            if (rel_kind_uses_k(c->rel)) {
                edge = fmax(edge, fmax(err_f(fast.d_table[l], rt, last, x.n_table, s),
                                       row0 ? err_f(fast.d_table[l], rt, 0, w, s) : 0.0));
                edge_size = fmin(edge_size, fmin(max_abs(rt, last, x.n_table),
                                                 row0 ? max_abs(rt, 0, w) : INFINITY));
            }
        }
        free(fd);
    }
    CHECK(t, fwd < FAST_TOL, "%s: forward ctx, probs equal the reference (rel err %.1e)", name,
          fwd);
    CHECK(t, gq < FAST_TOL, "%s: d_qkv equals the reference backward (rel err %.1e)", name, gq);
    CHECK(t, gb < 1e-6, "%s: d_qkv_bias equals the column sums of d_qkv (rel err %.1e)", name, gb);
    free(column_sums);
    CHECK(t, fdq < FD_TOL, "%s: reference d_qkv equals finite differences (rel err %.1e)", name,
          fdq);
    if (c->residual) {
        const double e = err_f(fast.d_carried, ref.d_carried, 0, x.n_sq,
                               max_abs(ref.d_carried, 0, x.n_sq));
        CHECK(t, e < FAST_TOL, "%s: d_carried equals the reference (rel err %.1e)", name, e);
    }
    if (x.n_table) {
        CHECK(t, gt < FAST_TOL, "%s: d_table equals the reference backward (rel err %.1e)", name,
              gt);
        CHECK(t, fdt < FD_TOL, "%s: reference d_table equals finite differences (rel err %.1e)",
              name, fdt);
        if (rel_kind_uses_k(c->rel) && c->rel_k < c->L - 1) /* clipped rows reachable: gradient != 0 */
            CHECK(t, edge < FAST_TOL && edge_size > 1e-6,
                  "%s: clipped edge rows (rel err %.1e, |grad| %.1e)", name, edge, edge_size);
    }
    free_fast(&fast, c->layers);
    free_ref(&ref, c->layers);
    for (int l = 0; l < c->layers; l++)
        free(qkv[l]), free(table[l]);
    free_inputs(&x, c->layers);
}

/* With k >= L-1, a table whose only non-zero row is r changes exactly the scores with
 * i - j = r - k (HuggingFace relative_key[_query]: distance_embedding[i - j + max_pos - 1]).
 * The scores are read from the carried buffer (residual, first layer: C = S). */
static void check_index_convention(TestTally *t, RelKind rel) {
    const Case c = {rel, 1, 7, 4, 1, 9, 1, 0, 1, 0.0f};
    Inputs x = make_inputs(&c, 11);
    const AttnShape s = layer_shape(&c, 0);
    float *scratch = xalloc_floats(attention_scratch_floats(&s));
    float *ctx = xalloc_floats(x.n_ctx), *probs = xalloc_floats(x.n_sq);
    float *base = xalloc_floats(x.n_sq), *probe = xalloc_floats(x.n_sq);
    const int rows[] = {c.rel_k + 2, c.rel_k - 3, 0, 2 * c.rel_k};
    for (int n = 0; n < 4; n++) {
        memset(x.table[0], 0, x.n_table * sizeof(float));
        attention_forward(ctx, probs, NULL, base, scratch, x.qkv[0], x.table[0], x.mask, &s, 0);
        for (int t2 = 0; t2 < c.H; t2++)
            x.table[0][(size_t)rows[n] * c.H + t2] = 0.7f;
        attention_forward(ctx, probs, NULL, probe, scratch, x.qkv[0], x.table[0], x.mask, &s, 0);
        int ok = 1, changed = 0;
        for (int i = 0; i < c.L; i++)
            for (int j = 0; j < c.L; j++) {
                const int differs = base[i * c.L + j] != probe[i * c.L + j];
                ok &= differs == (i - j == rows[n] - c.rel_k);
                changed += differs;
            }
        CHECK(t, ok && (changed > 0) == (abs(rows[n] - c.rel_k) < c.L),
              "%s k=%d L=%d: table row %d changes exactly the scores with i-j=%d (%d cells)",
              rel_kind_name(rel), c.rel_k, c.L, rows[n], rows[n] - c.rel_k, changed);
    }
    free(scratch), free(ctx), free(probs), free(base), free(probe);
    free_inputs(&x, 1);
}

/* 1 and 2 threads give the same bits; a second backward doubles d_table and rewrites d_qkv. */
static void check_threads(TestTally *t, RelKind rel) {
    const Case c = {rel, 4, 20, 16, 4, 5, 1, 1, 2, 0.1f};
    Inputs x = make_inputs(&c, 23);
    FastRun run[2];
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r + 1);
        run[r] = run_fast(&c, &x);
    }
    int same = 1;
    for (int l = 0; l < c.layers; l++) {
        same &= !memcmp(run[0].ctx[l], run[1].ctx[l], x.n_ctx * sizeof(float));
        same &= !memcmp(run[0].d_qkv[l], run[1].d_qkv[l], x.n_qkv * sizeof(float));
        same &= !memcmp(run[0].d_table[l], run[1].d_table[l], x.n_table * sizeof(float));
        same &= !memcmp(run[0].d_bias[l], run[1].d_bias[l], 3 * (size_t)c.H * sizeof(float));
    }
    CHECK(t, same, "%s: ctx, d_qkv, d_qkv_bias, d_table bit-identical with 1 and 2 threads",
          rel_kind_name(rel));
    /* a second backward of the last layer into the same d_table, d_qkv prefilled with NaN */
    const int l = c.layers - 1;
    AttnShape s = layer_shape(&c, l);
    s.residual = 0;
    float *scratch = xalloc_floats(attention_scratch_floats(&s));
    float *once = xcalloc(x.n_table + 1, sizeof(float)), *twice = xcalloc(x.n_table + 1, sizeof(float));
    float *bias_once = xcalloc(3 * (size_t)c.H, sizeof(float));
    float *bias_twice = xcalloc(3 * (size_t)c.H, sizeof(float));
    float *d_qkv = xalloc_floats(x.n_qkv), *d_qkv2 = xalloc_floats(x.n_qkv);
    float *raw = xalloc_floats(x.n_sq), *probs = xalloc_floats(x.n_sq), *ctx = xalloc_floats(x.n_ctx);
    attention_forward(ctx, probs, raw, NULL, scratch, x.qkv[l], x.table[l], x.mask, &s, 5);
    for (int call = 0; call < 2; call++) {
        float *dq = call ? d_qkv2 : d_qkv;
        for (size_t e = 0; e < x.n_qkv; e++)
            dq[e] = NAN;
        attention_backward(dq, bias_twice, rel ? twice : NULL, NULL, scratch, x.G[l], x.qkv[l],
                           x.table[l], probs, raw, &s, 5);
        if (!call) {
            memcpy(once, twice, x.n_table * sizeof(float));
            memcpy(bias_once, bias_twice, 3 * (size_t)c.H * sizeof(float));
        }
    }
    double err = 0.0, size = 1e-30, bias_err = 0.0, bias_size = 1e-30;
    for (size_t e = 0; e < x.n_table; e++) {
        err = fmax(err, fabs(twice[e] - 2.0 * once[e]));
        size = fmax(size, fabs(once[e]));
    }
    for (size_t e = 0; e < 3 * (size_t)c.H; e++) {
        bias_err = fmax(bias_err, fabs(bias_twice[e] - 2.0 * bias_once[e]));
        bias_size = fmax(bias_size, fabs(bias_once[e]));
    }
    CHECK(t, !memcmp(d_qkv, d_qkv2, x.n_qkv * sizeof(float)) && err / size < 1e-6 &&
                 bias_err / bias_size < 1e-6,
          "%s: d_qkv overwritten, d_table and d_qkv_bias accumulated by a second backward",
          rel_kind_name(rel));
    free(scratch), free(once), free(twice), free(d_qkv), free(d_qkv2), free(raw), free(probs);
    free(bias_once), free(bias_twice);
    free(ctx);
    for (int r = 0; r < 2; r++)
        free_fast(&run[r], c.layers);
    free_inputs(&x, c.layers);
    omp_set_num_threads(2);
}

int main(void) {
    TestTally t = {0};
    uint64_t seed = 1;
    for (RelKind rel = REL_NONE; rel <= REL_ROPE; rel++) {
        const int ks[] = {2, 9};
        for (int n = 0; n < (rel_kind_uses_k(rel) ? 2 : 1); n++) {
            const Case plain = {rel, 2, 7, 12, 2, ks[n], 0, 0, 1, 0.0f};
            const Case residual = {rel, 2, 7, 12, 2, ks[n], 1, 0, 3, 0.0f};
            const Case residual_mean = {rel, 2, 7, 12, 2, ks[n], 1, 1, 3, 0.0f};
            check_case(&t, &plain, seed++);
            check_case(&t, &residual, seed++);
            check_case(&t, &residual_mean, seed++);
        }
        /* several row blocks (16 rows at L = 36): method3 regions, QA / KA blocks with k below
         * and above L-1 */
        const Case longer = {rel, 1, 36, 4, 1, 3, 0, 0, 1, 0.0f};
        const Case longer_wide = {rel, 1, 36, 4, 1, 40, 0, 0, 1, 0.0f};
        if (rel != REL_NONE)
            check_case(&t, &longer, seed++);
        if (rel == REL_SHAW || rel == REL_METHOD3 || rel == REL_METHOD4)
            check_case(&t, &longer_wide, seed++);
        const Case blocked = {rel, 1, 64, 4, 1, 70, 0, 0, 1, 0.0f};
        if (rel == REL_SHAW || rel == REL_METHOD4) {
            AttnPlan plan;
            const AttnShape shape = layer_shape(&blocked, 0);
            attn_plan(&plan, &shape, NULL);
            CHECK(&t, plan.block == 32, "%s: L = 64, k = 70 runs the relative terms in blocks of 32 rows (%d)",
                  rel_kind_name(rel), plan.block);
            check_case(&t, &blocked, seed++);
        }
        /* dropout, plain and residual, every mode */
        const Case dropout_plain = {rel, 2, 7, 12, 2, 2, 0, 0, 1, 0.3f};
        const Case dropout_residual = {rel, 2, 7, 12, 2, 9, 1, 1, 2, 0.2f};
        check_case(&t, &dropout_plain, seed++);
        check_case(&t, &dropout_residual, seed++);
    }
    check_index_convention(&t, REL_SHAW);
    check_index_convention(&t, REL_METHOD4);
    for (RelKind rel = REL_NONE; rel <= REL_ROPE; rel++)
        check_threads(&t, rel);
    return tally_exit(&t);
}
