/* The conventions of the position terms of layers/positions.h, which the fast path and the C
 * reference share (test_attention.c cannot see a wrong one; the PyTorch reference of
 * test_parity.sh can, and these checks name it directly):
 *   - t5_bucket against HuggingFace's _relative_position_bucket (bidirectional): the relative
 *     positions at which the bucket steps up, as printed by HF's formula in torch, for four
 *     (num_buckets, max_distance) pairs, on both sides, far past max_distance;
 *   - alibi_slope against Press et al.'s get_slopes for 1, 2, 4, 6 and 12 heads;
 *   - attention itself: a t5 table with one non-zero entry (bucket c, head h) changes exactly the
 *     scores of head h whose j - i falls in bucket c; alibi with q = k = 0 gives scores
 *     -m_h |i - j|; rope scores of rows that are all the same vector depend on j - i only (and
 *     differ for different j - i). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/positions.h"
#include "tests/check.h"

/* For rel = 1, 2, ...: the rel at which the bucket steps up by one (as HF's code gives them);
 * the negative side is the mirror, starting from bucket 0 instead of num_buckets/2. */
typedef struct {
    int num_buckets, max_distance, steps;
    int step_at[32];
} BucketSteps;

static const BucketSteps hf_steps[] = {
    {32, 128, 15, {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 23, 32, 46, 64, 91}},
    {8, 20, 3, {1, 2, 7}},
    {6, 7, 2, {1, 3}},
    {64, 512, 31, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 25, 31, 39, 48, 59, 73,
                   91, 113, 140, 174, 216, 268, 332, 413}},
};

static void check_buckets(TestTally *t) {
    for (size_t c = 0; c < sizeof hf_steps / sizeof *hf_steps; c++) {
        const BucketSteps *s = &hf_steps[c];
        int ok = t5_bucket(0, s->num_buckets, s->max_distance) == 0, first_bad = 0;
        for (int side = 0; side < 2 && ok; side++) {
            int expect = side ? s->num_buckets / 2 : 0, next = 0;
            for (int n = 1; n <= 4 * s->max_distance; n++) {
                if (next < s->steps && n == s->step_at[next])
                    expect++, next++;
                const int got = t5_bucket(side ? n : -n, s->num_buckets, s->max_distance);
                if (got != expect) {
                    ok = 0, first_bad = side ? n : -n;
                    break;
                }
            }
        }
        CHECK(t, ok, "t5_bucket(rel, %d, %d) = HF's buckets for |rel| <= %d (first differing rel: %d, "
              "0 = none)", s->num_buckets, s->max_distance, 4 * s->max_distance, first_bad);
    }
}

static void check_slopes(TestTally *t) {
    static const double press[][12] = {
        {0.00390625},
        {0.0625, 0.00390625},
        {0.25, 0.0625, 0.015625, 0.00390625},
        {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125},
        {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625, 0.7071067811865476,
         0.35355339059327384, 0.17677669529663692, 0.08838834764831849},
    };
    static const int heads[] = {1, 2, 4, 6, 12};
    for (int c = 0; c < 5; c++) {
        double err = 0.0;
        for (int h = 0; h < heads[c]; h++)
            err = fmax(err, fabs(alibi_slope(h, heads[c]) - press[c][h]) / press[c][h]);
        CHECK(t, err < 1e-15, "alibi_slope of %d heads = Press et al.'s get_slopes (rel err %.1e)",
              heads[c], err);
    }
}

enum { B = 1, L = 9, H = 8, HEADS = 2, D = H / HEADS };

/* Scores S of the first layer (read from the carried buffer, C = S) for qkv and table. */
static void scores_of(float *scores, const float *qkv, const float *table, RelKind rel) {
    const AttnShape s = {.B = B, .L = L, .H = H, .num_heads = HEADS, .rel = rel, .residual = 1,
                         .first_layer = 1, .carried_scale = 1.0f, .threads = omp_get_max_threads(),
                         .t5_num_buckets = 8, .t5_max_distance = 6, .rope_theta = 10000.0f};
    float *scratch = xalloc_floats(attention_scratch_floats(&s));
    float *ctx = xalloc_floats(B * L * H), *probs = xalloc_floats(B * HEADS * L * L);
    int mask[B * L];
    for (int n = 0; n < B * L; n++)
        mask[n] = 1;
    attention_forward(ctx, probs, NULL, scores, scratch, qkv, table, mask, &s, 0);
    free(scratch), free(ctx), free(probs);
}

static void check_attention(TestTally *t) {
    Rng rng;
    rng_seed(&rng, 5);
    float qkv[B * L * 3 * H], table[8 * HEADS], base[HEADS * L * L], probe[HEADS * L * L];
    for (int e = 0; e < B * L * 3 * H; e++)
        qkv[e] = (float)rng_normal(&rng);
    /* t5: entry (bucket 5, head 1) alone changes exactly its scores */
    memset(table, 0, sizeof table);
    scores_of(base, qkv, table, REL_T5);
    table[5 * HEADS + 1] = 0.75f;
    scores_of(probe, qkv, table, REL_T5);
    int ok = 1, changed = 0;
    for (int h = 0; h < HEADS; h++)
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++) {
                const int e = (h * L + i) * L + j, in = h == 1 && t5_bucket(j - i, 8, 6) == 5;
                ok &= in ? fabsf(probe[e] - base[e] - 0.75f) < 1e-6f : probe[e] == base[e];
                changed += in;
            }
    CHECK(t, ok && changed > 0, "t5: table entry (bucket 5, head 1) adds to exactly the %d scores of "
          "head 1 with bucket(j-i) = 5", changed);
    /* alibi: q = k = 0 leaves the bias alone */
    float zero_qk[B * L * 3 * H];
    memcpy(zero_qk, qkv, sizeof zero_qk);
    for (int n = 0; n < B * L; n++)
        memset(zero_qk + n * 3 * H, 0, 2 * H * sizeof(float));
    scores_of(base, zero_qk, NULL, REL_ALIBI);
    double err = 0.0;
    for (int h = 0; h < HEADS; h++)
        for (int i = 0; i < L; i++)
            for (int j = 0; j < L; j++)
                err = fmax(err, fabs(base[(h * L + i) * L + j] + alibi_slope(h, HEADS) * abs(i - j)));
    CHECK(t, err < 1e-6, "alibi: q = k = 0 gives scores -m_h |i-j| (err %.1e)", err);
    /* rope: every row the same q and k: S_ij depends on j - i alone */
    float same[B * L * 3 * H];
    for (int n = 0; n < B * L; n++)
        memcpy(same + n * 3 * H, qkv, 3 * H * sizeof(float));
    scores_of(base, same, NULL, REL_ROPE);
    double shift_err = 0.0, spread = 0.0;
    for (int h = 0; h < HEADS; h++)
        for (int i = 1; i < L; i++)
            for (int j = 1; j < L; j++) {
                const float s = base[(h * L + i) * L + j], s0 = base[(h * L + i - 1) * L + j - 1];
                shift_err = fmax(shift_err, fabs(s - s0));
                spread = fmax(spread, fabs(s - base[(h * L + i) * L + i]));
            }
    CHECK(t, shift_err < 1e-5 && spread > 0.1,
          "rope: identical rows give scores that depend on j-i only (err %.1e) and vary with it (%.2f)",
          shift_err, spread);
}

int main(void) {
    TestTally t = {0};
    check_buckets(&t);
    check_slopes(&t);
    check_attention(&t);
    return tally_exit(&t);
}
