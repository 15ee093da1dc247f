/* Attention core (layers/attention.c, layers/relpos.c) against a naive double-precision
 * reference written here from the formulas in attention.h (per element clip, no GEMMs, no band
 * splits). For every mode x {plain, residual over 3 layers with carried_scale 1 and 1/l}:
 *   - the fast forward equals the reference (ctx of every layer);
 *   - d_qkv and d_table of every layer equal central differences of the reference loss
 *     sum_l sum ctx_l (.) G_l, G_l fixed random (d_ctx_l = G_l), the carried buffer threaded
 *     through the forward calls and back through the backward calls;
 *   - k both below and above L-1, padding keys, dropout cases, and L = 36 where the relative
 *     terms run in several row blocks (block = 16 rows at this L).
 * Also: the table row used for (i, j) is i-j+k (HuggingFace's relative_key[_query] at k >= L-1),
 * d_table accumulates, d_qkv is overwritten, and results are bit-identical with 1 and 2
 * threads. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "tests/check.h"

#define MAX_LAYERS 3
static const double FD_STEP = 1e-5;  /* central differences of the double reference */
static const double GRAD_TOL = 1e-4; /* max |analytic - numeric| / max |numeric| */
static const double FWD_TOL = 1e-5;  /* max |fast - reference| / max |reference| */

typedef struct {
    RelKind rel;
    int B, L, H, heads, k;
    int residual, mean, layers; /* mean: carried_scale = 1/l */
    float dropout;
} Case;

/* Inputs of a case: per layer qkv, table, G; one padding mask. */
typedef struct {
    size_t n_qkv, n_table, n_ctx, n_sq;
    float *qkv[MAX_LAYERS], *table[MAX_LAYERS], *G[MAX_LAYERS];
    int *mask;
} Inputs;

static uint64_t layer_key(int l) { return hash_key(77, 3, (uint64_t)l * 8 + 1); }

static AttnShape layer_shape(const Case *c, int l) {
    return (AttnShape){.B = c->B, .L = c->L, .H = c->H, .num_heads = c->heads, .rel = c->rel,
                       .k = c->k, .residual = c->residual, .first_layer = l == 0,
                       .carried_scale = c->mean ? 1.0f / (float)(l + 1) : 1.0f,
                       .dropout = c->dropout, .threads = omp_get_max_threads()};
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
    x.n_table = (size_t)attention_table_rows(c->rel, c->k) * attention_table_cols(c->rel, d);
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

/* ---- fast path ------------------------------------------------------------------------- */

/* Forward through the layers, then backward with d_ctx_l = G_l. Outputs ctx, d_qkv, d_table
 * per layer (d_table starts at 0 and accumulates; d_qkv starts as NaN). */
static void run_fast(const Case *c, const Inputs *x, const float *const *qkv, float **ctx,
                     float **d_qkv, float **d_table) {
    AttnShape s = layer_shape(c, 0);
    float *scratch = xalloc_floats(attention_scratch_floats(&s));
    float *probs[MAX_LAYERS], *raw[MAX_LAYERS];
    float *carried = xalloc_floats(x->n_sq), *d_carried = xalloc_floats(x->n_sq);
    for (int l = 0; l < c->layers; l++) {
        s = layer_shape(c, l);
        probs[l] = xalloc_floats(x->n_sq);
        raw[l] = xalloc_floats(x->n_sq);
        attention_forward(ctx[l], probs[l], raw[l], c->residual ? carried : NULL,
                          scratch, qkv[l], x->table[l], x->mask, &s, layer_key(l));
    }
    for (int l = c->layers - 1; l >= 0; l--) {
        s = layer_shape(c, l);
        for (size_t e = 0; e < x->n_qkv; e++)
            d_qkv[l][e] = NAN;
        attention_backward(d_qkv[l], d_table ? d_table[l] : NULL, c->residual ? d_carried : NULL,
                           scratch, x->G[l], qkv[l], x->table[l], probs[l], raw[l],
                           &s, layer_key(l));
    }
    for (int l = 0; l < c->layers; l++) {
        free(probs[l]);
        free(raw[l]);
    }
    free(carried);
    free(d_carried);
    free(scratch);
}

/* ---- naive double reference ------------------------------------------------------------ */

static double ref_score(RelKind rel, const double *q, const double *kv, const double *tab, int i,
                        int j, int d, int k) {
    const int delta = i - j, clipped = delta < -k ? -k : (delta > k ? k : delta);
    const int r = clipped + k, s = abs(clipped);
    double qk = 0.0, qa = 0.0, ka = 0.0, qka = 0.0;
    for (int t = 0; t < d; t++) {
        qk += q[t] * kv[t];
        if (rel == REL_SHAW || rel == REL_METHOD3 || rel == REL_METHOD4) {
            const double a = tab[(size_t)r * d + t];
            qa += q[t] * a, ka += kv[t] * a, qka += q[t] * kv[t] * a;
        }
    }
    switch (rel) {
    case REL_NONE: return qk;
    case REL_SHAW: return qk + qa;
    case REL_METHOD1: return qk * tab[s];
    case REL_METHOD2: return qk * tab[r];
    case REL_METHOD3: return qka;
    case REL_METHOD4: return qk + qa + ka;
    }
    return NAN;
}

/* sum_l sum ctx_l (.) G_l; ctx_out[l] (if not NULL) gets each layer's ctx. */
static double ref_loss(const Case *c, const Inputs *x, double *const *qkv, double *const *tab,
                       double **ctx_out) {
    const int B = c->B, L = c->L, H = c->H, nh = c->heads, d = H / nh, ld = 3 * H;
    const double scale = 1.0 / sqrt((double)d);
    double *C = xcalloc(x->n_sq, sizeof(double)), *p = xmalloc((size_t)L * sizeof(double));
    double loss = 0.0;
    for (int l = 0; l < c->layers; l++) {
        const double cs = c->mean ? 1.0 / (l + 1) : 1.0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < nh; h++)
                for (int i = 0; i < L; i++) {
                    const double *q = qkv[l] + (size_t)(b * L + i) * ld + h * d;
                    double *Ci = C + (((size_t)b * nh + h) * L + i) * L, mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j < L; j++) {
                        const double *kv = qkv[l] + (size_t)(b * L + j) * ld + H + h * d;
                        double sc = scale * ref_score(c->rel, q, kv, tab[l], i, j, d, c->k);
                        if (c->residual) {
                            Ci[j] = (l ? Ci[j] : 0.0) + sc;
                            sc = cs * Ci[j];
                        }
                        p[j] = sc + (x->mask[b * L + j] ? 0.0 : -10000.0);
                        mx = fmax(mx, p[j]);
                    }
                    for (int j = 0; j < L; j++)
                        sum += (p[j] = exp(p[j] - mx));
                    for (int j = 0; j < L; j++) {
                        const size_t e = (((size_t)b * nh + h) * L + i) * L + j;
                        const int keep = hash_uniform(layer_key(l), e) >= c->dropout;
                        p[j] = keep ? p[j] / sum / (1.0 - c->dropout) : 0.0;
                    }
                    for (int t = 0; t < d; t++) {
                        double o = 0.0;
                        for (int j = 0; j < L; j++)
                            o += p[j] * qkv[l][(size_t)(b * L + j) * ld + 2 * H + h * d + t];
                        const size_t e = (size_t)(b * L + i) * H + h * d + t;
                        loss += o * x->G[l][e];
                        if (ctx_out)
                            ctx_out[l][e] = o;
                    }
                }
    }
    free(C);
    free(p);
    return loss;
}

static double *to_doubles(const float *v, size_t n) {
    double *y = xmalloc((n ? n : 1) * sizeof(double));
    for (size_t e = 0; e < n; e++)
        y[e] = v[e];
    return y;
}

/* Central differences of ref_loss with respect to every element of v[0 .. n). */
static void fd_grad(double *fd, double *v, size_t n, const Case *c, const Inputs *x,
                    double *const *qkv, double *const *tab) {
    for (size_t e = 0; e < n; e++) {
        const double keep = v[e];
        v[e] = keep + FD_STEP;
        const double up = ref_loss(c, x, qkv, tab, NULL);
        v[e] = keep - FD_STEP;
        const double down = ref_loss(c, x, qkv, tab, NULL);
        v[e] = keep;
        fd[e] = (up - down) / (2.0 * FD_STEP);
    }
}

/* max |a - b| over [lo, hi) / scale (NaN in a propagates, failing every "<" check) */
static double max_err(const float *a, const double *b, size_t lo, size_t hi, double scale) {
    double err = 0.0;
    for (size_t e = lo; e < hi; e++) {
        const double diff = fabs(a[e] - b[e]);
        err = diff > err || isnan(diff) ? diff : err;
    }
    return err / scale;
}

static double max_abs(const double *v, size_t lo, size_t hi) {
    double m = 1e-30;
    for (size_t e = lo; e < hi; e++)
        m = fmax(m, fabs(v[e]));
    return m;
}

static void check_case(TestTally *t, const Case *c, uint64_t seed) {
    char name[160];
    snprintf(name, sizeof name, "%s k=%d B=%d L=%d H=%d heads=%d %s dropout=%g",
             rel_kind_name(c->rel), c->k, c->B, c->L, c->H, c->heads,
             !c->residual ? "plain" : c->mean ? "residual(1/l)" : "residual(1)",
             (double)c->dropout);
    if (c->residual)
        snprintf(name + strlen(name), sizeof name - strlen(name), " layers=%d", c->layers);
    Inputs x = make_inputs(c, seed);
    const int d = c->H / c->heads;
    float *ctx[MAX_LAYERS], *d_qkv[MAX_LAYERS], *d_tab[MAX_LAYERS];
    double *qkv[MAX_LAYERS], *tab[MAX_LAYERS], *ctx_ref[MAX_LAYERS];
    for (int l = 0; l < c->layers; l++) {
        ctx[l] = xalloc_floats(x.n_ctx);
        d_qkv[l] = xalloc_floats(x.n_qkv);
        d_tab[l] = xalloc_floats(x.n_table ? x.n_table : 1);
        qkv[l] = to_doubles(x.qkv[l], x.n_qkv);
        tab[l] = to_doubles(x.table[l], x.n_table);
        ctx_ref[l] = xmalloc(x.n_ctx * sizeof(double));
    }
    run_fast(c, &x, (const float *const *)x.qkv, ctx, d_qkv, c->rel ? d_tab : NULL);
    ref_loss(c, &x, qkv, tab, ctx_ref);

    double fwd = 0.0, gq = 0.0, gt = 0.0, edge = 0.0, edge_size = INFINITY;
    for (int l = 0; l < c->layers; l++) {
        fwd = fmax(fwd, max_err(ctx[l], ctx_ref[l], 0, x.n_ctx, max_abs(ctx_ref[l], 0, x.n_ctx)));
        double *fd = xmalloc((x.n_qkv + x.n_table) * sizeof(double));
        fd_grad(fd, qkv[l], x.n_qkv, c, &x, qkv, tab);
        gq = fmax(gq, max_err(d_qkv[l], fd, 0, x.n_qkv, max_abs(fd, 0, x.n_qkv)));
        if (x.n_table) {
            double *fdt = fd + x.n_qkv;
            fd_grad(fdt, tab[l], x.n_table, c, &x, qkv, tab);
            const double s = max_abs(fdt, 0, x.n_table);
            gt = fmax(gt, max_err(d_tab[l], fdt, 0, x.n_table, s));
            /* clipped edge rows: the last row, and row 0 (not for method1, where it is s = 0) */
            const size_t w = (size_t)attention_table_cols(c->rel, d), last = x.n_table - w;
            const int row0 = c->rel != REL_METHOD1;
            edge = fmax(edge, fmax(max_err(d_tab[l], fdt, last, x.n_table, s),
                                   row0 ? max_err(d_tab[l], fdt, 0, w, s) : 0.0));
            edge_size = fmin(edge_size, fmin(max_abs(fdt, last, x.n_table),
                                             row0 ? max_abs(fdt, 0, w) : INFINITY));
        }
        free(fd);
    }
    CHECK(t, fwd < FWD_TOL, "%s: forward equals reference (rel err %.1e)", name, fwd);
    CHECK(t, gq < GRAD_TOL, "%s: d_qkv equals finite differences (rel err %.1e)", name, gq);
    if (x.n_table) {
        CHECK(t, gt < GRAD_TOL, "%s: d_table equals finite differences (rel err %.1e)", name, gt);
        if (c->k < c->L - 1) /* the clipped rows are reachable: their gradient is not trivially 0 */
            CHECK(t, edge < GRAD_TOL && edge_size > 1e-6,
                  "%s: clipped edge rows (rel err %.1e, |grad| %.1e)", name, edge, edge_size);
    }
    for (int l = 0; l < c->layers; l++) {
        free(ctx[l]), free(d_qkv[l]), free(d_tab[l]);
        free(qkv[l]), free(tab[l]), free(ctx_ref[l]);
    }
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
    const int rows[] = {c.k + 2, c.k - 3, 0, 2 * c.k};
    for (int n = 0; n < 4; n++) {
        memset(x.table[0], 0, x.n_table * sizeof(float));
        attention_forward(ctx, probs, NULL, base, scratch, x.qkv[0], x.table[0], x.mask, &s,
                          0);
        for (int t2 = 0; t2 < c.H; t2++)
            x.table[0][(size_t)rows[n] * c.H + t2] = 0.7f;
        attention_forward(ctx, probs, NULL, probe, scratch, x.qkv[0], x.table[0], x.mask,
                          &s, 0);
        int ok = 1, changed = 0;
        for (int i = 0; i < c.L; i++)
            for (int j = 0; j < c.L; j++) {
                const int differs = base[i * c.L + j] != probe[i * c.L + j];
                ok &= differs == (i - j == rows[n] - c.k);
                changed += differs;
            }
        CHECK(t, ok && (changed > 0) == (abs(rows[n] - c.k) < c.L),
              "%s k=%d L=%d: table row %d changes exactly the scores with i-j=%d (%d cells)",
              rel_kind_name(rel), c.k, c.L, rows[n], rows[n] - c.k, changed);
    }
    free(scratch), free(ctx), free(probs), free(base), free(probe);
    free_inputs(&x, 1);
}

/* 1 and 2 threads give the same bits; a second backward doubles d_table and rewrites d_qkv. */
static void check_threads(TestTally *t, RelKind rel) {
    const Case c = {rel, 4, 20, 16, 4, 5, 1, 1, 2, 0.1f};
    Inputs x = make_inputs(&c, 23);
    float *out[2][3][MAX_LAYERS];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        for (int l = 0; l < c.layers; l++) {
            out[run][0][l] = xalloc_floats(x.n_ctx);
            out[run][1][l] = xalloc_floats(x.n_qkv);
            out[run][2][l] = xalloc_floats(x.n_table ? x.n_table : 1);
        }
        run_fast(&c, &x, (const float *const *)x.qkv, out[run][0], out[run][1],
                 rel ? out[run][2] : NULL);
    }
    int same = 1;
    for (int l = 0; l < c.layers; l++) {
        same &= !memcmp(out[0][0][l], out[1][0][l], x.n_ctx * sizeof(float));
        same &= !memcmp(out[0][1][l], out[1][1][l], x.n_qkv * sizeof(float));
        same &= !memcmp(out[0][2][l], out[1][2][l], x.n_table * sizeof(float));
    }
    CHECK(t, same, "%s: ctx, d_qkv, d_table bit-identical with 1 and 2 threads", rel_kind_name(rel));
    run_fast(&c, &x, (const float *const *)x.qkv, out[1][0], out[1][1], rel ? out[1][2] : NULL);
    int doubled = 1;
    for (int l = 0; l < c.layers; l++) {
        doubled &= !memcmp(out[0][1][l], out[1][1][l], x.n_qkv * sizeof(float));
        double err = 0.0, size = 1e-30;
        for (size_t e = 0; e < x.n_table; e++) {
            err = fmax(err, fabs(out[1][2][l][e] - 2.0 * out[0][2][l][e]));
            size = fmax(size, fabs(out[0][2][l][e]));
        }
        doubled &= err / size < 1e-6;
    }
    CHECK(t, doubled, "%s: d_qkv overwritten, d_table accumulated by a second backward",
          rel_kind_name(rel));
    for (int run = 0; run < 2; run++)
        for (int a = 0; a < 3; a++)
            for (int l = 0; l < c.layers; l++)
                free(out[run][a][l]);
    free_inputs(&x, c.layers);
    omp_set_num_threads(2);
}

int main(void) {
    TestTally t = {0};
    uint64_t seed = 1;
    for (RelKind rel = REL_NONE; rel <= REL_METHOD4; rel++) {
        const int ks[] = {2, 9};
        for (int n = 0; n < (rel == REL_NONE ? 1 : 2); n++) {
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
    }
    const Case dropout_residual = {REL_METHOD4, 2, 7, 12, 2, 2, 1, 1, 3, 0.2f};
    const Case dropout_plain = {REL_METHOD1, 2, 7, 12, 2, 9, 0, 0, 1, 0.3f};
    check_case(&t, &dropout_residual, seed++);
    check_case(&t, &dropout_plain, seed++);
    check_index_convention(&t, REL_SHAW);
    check_index_convention(&t, REL_METHOD4);
    for (RelKind rel = REL_NONE; rel <= REL_METHOD4; rel++)
        check_threads(&t, rel);
    return tally_exit(&t);
}
