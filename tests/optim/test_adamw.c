/* optim/adamw.c's update loop: its AVX-512 form against its portable form, bit for bit (parameters,
 * both moments, the consumed gradient and the bf16 copy), over spans of 1-100 elements (whole
 * registers and every tail) and one of 100000, with and without decay and bias correction's
 * factors, gradients of mixed magnitude (zeros, 1e-30, 1e3); and the portable form against the
 * formula in double (torch.optim.AdamW's order) to within fp32 rounding (values of order 1, 1e-6). */
#include "optim/adamw.h"
#include "tests/layer_testing.h"

enum { SPAN_MAX = 100000 };

typedef struct {
    float *p, *m, *v, *g;
    bf16 *p16;
} Span;

static Span span_alloc(Pool *pool, long n) {
    return (Span){zeros(pool, (size_t)n), zeros(pool, (size_t)n), zeros(pool, (size_t)n), zeros(pool, (size_t)n),
                  pool_alloc(pool, (size_t)n, sizeof(bf16))};
}

/* to's first n elements = from's (the bf16 copy cleared) */
static void span_fill(Span *to, const Span *from, long n) {
    memcpy(to->p, from->p, (size_t)n * sizeof(float));
    memcpy(to->m, from->m, (size_t)n * sizeof(float));
    memcpy(to->v, from->v, (size_t)n * sizeof(float));
    memcpy(to->g, from->g, (size_t)n * sizeof(float));
    memset(to->p16, 0, (size_t)n * sizeof(bf16));
}

static int spans_same(const Span *a, const Span *b, long n) {
    return same_bits(a->p, b->p, (size_t)n) && same_bits(a->m, b->m, (size_t)n) && same_bits(a->v, b->v, (size_t)n) &&
           same_bits(a->g, b->g, (size_t)n) && !memcmp(a->p16, b->p16, (size_t)n * sizeof(bf16));
}

static void test_isa(TestTally *t, Rng *rng) {
    if (!cpu_has_avx512_loops()) {
        printf("SKIP adamw's AVX-512 loop (this CPU has no AVX-512 F, BW, DQ and VL)\n");
        return;
    }
    Pool pool = {0};
    Span init = {uniform(&pool, rng, SPAN_MAX, -1, 1), uniform(&pool, rng, SPAN_MAX, -0.1f, 0.1f),
                 uniform(&pool, rng, SPAN_MAX, 0, 0.01f), uniform(&pool, rng, SPAN_MAX, -2, 2), NULL};
    for (long e = 0; e < SPAN_MAX; e += 7) /* mixed magnitudes */
        init.g[e] = e % 3 == 0 ? 0.0f : e % 3 == 1 ? 1e-30f : 1e3f;
    const AdamWScalars settings[] = {{1.0f, 0.9999f, 0.9f, 0.999f, 1e-3f, 0.0447f, 1e-6f},
                                     {0.37f, 1.0f, 0.8f, 0.98f, 3e-3f, 1.0f, 1e-8f}};
    Span a = span_alloc(&pool, SPAN_MAX), b = span_alloc(&pool, SPAN_MAX);
    int same = 1, spans = 0;
    long bad_n = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 101; i++) { /* n = 1 .. 100, then SPAN_MAX */
            const long n = i < 100 ? i + 1 : SPAN_MAX;
            for (int with16 = 0; with16 < 2; with16++) {
                span_fill(&a, &init, n);
                span_fill(&b, &init, n);
                adamw_span_isa(0, a.p, a.m, a.v, a.g, with16 ? a.p16 : NULL, n, &settings[s]);
                adamw_span_isa(1, b.p, b.m, b.v, b.g, with16 ? b.p16 : NULL, n, &settings[s]);
                const int ok = spans_same(&a, &b, n);
                if (!ok && same)
                    bad_n = n;
                same &= ok;
                spans++;
            }
        }
    CHECK(t, same, "adamw's AVX-512 loop = its portable loop, bit for bit (p, m, v, g consumed, bf16 copy): %d spans "
          "of 1-100 and %d elements, two settings (first difference: %ld elements)", spans, SPAN_MAX, bad_n);
    pool_release(&pool);
}

/* The portable loop against the update in double, element by element. */
static void test_formula(TestTally *t, Rng *rng) {
    Pool pool = {0};
    const long n = 1000;
    Span s = {uniform(&pool, rng, n, -1, 1), uniform(&pool, rng, n, -0.1f, 0.1f), uniform(&pool, rng, n, 0, 0.01f),
              uniform(&pool, rng, n, -2, 2), NULL};
    Span before = span_alloc(&pool, n);
    span_fill(&before, &s, n);
    const AdamWScalars k = {0.5f, 0.999f, 0.9f, 0.999f, 2e-3f, 0.0447f, 1e-6f};
    adamw_span_isa(0, s.p, s.m, s.v, s.g, NULL, n, &k);
    double worst = 0.0;
    int consumed = 1;
    for (long e = 0; e < n; e++) {
        const double grad = (double)before.g[e] * k.grad_scale;
        const double m = k.b1 * (double)before.m[e] + (1.0 - k.b1) * grad;
        const double v = k.b2 * (double)before.v[e] + (1.0 - k.b2) * grad * grad;
        const double p = (double)before.p[e] * k.decay - k.step_size * m / (sqrt(v) / k.c2_sqrt + k.eps);
        worst = fmax(worst, fmax(fabs(p - s.p[e]), fmax(fabs(m - s.m[e]), fabs(v - s.v[e]))));
        consumed &= s.g[e] == 0.0f;
    }
    CHECK(t, worst < 1e-6 && consumed, "adamw's loop = the update in double (values of order 1: worst abs err %.2e), "
          "gradient consumed (%s)",
          worst, consumed ? "zeros" : "NOT zeroed");
    pool_release(&pool);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20261207);
    test_isa(&t, &rng);
    test_formula(&t, &rng);
    return tally_exit(&t);
}
