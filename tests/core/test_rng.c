/* core/rng.h hash_bits24, the dropout masks' counter-based hash, as dropout uses it: element
 * indices counting up from 0 under keys from hash_key(seed, step, site).
 *   - uniform: chi-square of the top 8 of the 24 bits over 256 cells, and the kept fraction at
 *     p = 0.1, for sequential indices;
 *   - no correlation between an element and its neighbour (e+1), the element a row of 128 below
 *     (e+128: the next query row of an [L, L] score block) and the same element under the next
 *     step's key and the next site's key, nor with the next step's element e ^ x, x the xor of
 *     the two keys' low words (which a hash keyed by xor alone would map to the same bits);
 *   - avalanche: flipping any one of the 32 bits of a random index flips each of the 24 output
 *     bits with probability 1/2;
 *   - dropout_indices_fit's bound.
 * Bounds are about 5 standard deviations of an ideal hash, so a sound hash passes with any key
 * and a weak one fails (a multiplicative hash fails most checks; one mixing round keyed by the
 * low key word alone fails the xor-shifted one with r = 1). */
#include <math.h>
#include <stdlib.h>

#include "core/rng.h"
#include "tests/check.h"

enum { SAMPLES = 1 << 20 };

static double uniform(uint64_t key, uint32_t index) { return hash_bits24(key, index) / 16777216.0; }

static void check_uniform(TestTally *t, uint64_t key) {
    static long cells[256];
    long kept = 0;
    const uint32_t threshold = hash_threshold(0.1f);
    for (int c = 0; c < 256; c++)
        cells[c] = 0;
    for (uint32_t e = 0; e < SAMPLES; e++) {
        const uint32_t bits = hash_bits24(key, e);
        cells[bits >> 16]++;
        kept += bits >= threshold;
    }
    double chi2 = 0.0, expected = SAMPLES / 256.0;
    for (int c = 0; c < 256; c++)
        chi2 += (cells[c] - expected) * (cells[c] - expected) / expected;
    /* chi-square, 255 degrees of freedom: mean 255, sd sqrt(510) = 22.6 */
    CHECK(t, chi2 < 255 + 5 * 22.6, "top 8 bits uniform over %d sequential indices (chi2 %.1f, 255 dof)",
          SAMPLES, chi2);
    const double frac = (double)kept / SAMPLES, sd = sqrt(0.9 * 0.1 / SAMPLES);
    CHECK(t, fabs(frac - 0.9) < 5 * sd, "kept fraction at p = 0.1 is %.5f (0.9 +- %.5f)", frac, 5 * sd);
}

/* Pearson correlation of u(key_a, e) and u(key_b, (e + shift) ^ flip) over e < SAMPLES. */
static double correlation(uint64_t key_a, uint64_t key_b, uint32_t shift, uint32_t flip) {
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (uint32_t e = 0; e < SAMPLES; e++) {
        const double a = uniform(key_a, e), b = uniform(key_b, (e + shift) ^ flip);
        sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b;
    }
    const double n = SAMPLES, cov = sab / n - sa / n * sb / n;
    return cov / sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
}

static void check_independent(TestTally *t, uint64_t seed) {
    const uint64_t key = hash_key(seed, 10, 3), next_step = hash_key(seed, 11, 3);
    const double limit = 5.0 / sqrt((double)SAMPLES);
    const struct {
        const char *what;
        uint64_t other;
        uint32_t shift, flip;
    } pairs[] = {{"neighbour e+1", key, 1, 0},
                 {"next row e+128", key, 128, 0},
                 {"next step's key", next_step, 0, 0},
                 {"next site's key", hash_key(seed, 10, 4), 0, 0},
                 {"next step's key at e ^ (low key words' xor)", next_step, 0,
                  (uint32_t)key ^ (uint32_t)next_step}};
    for (size_t n = 0; n < sizeof pairs / sizeof pairs[0]; n++) {
        const double r = correlation(key, pairs[n].other, pairs[n].shift, pairs[n].flip);
        CHECK(t, fabs(r) < limit, "no correlation with the %s (r = %+.5f, |r| < %.5f)", pairs[n].what, r,
              limit);
    }
}

static void check_avalanche(TestTally *t, uint64_t key) {
    enum { TRIALS = 1 << 16 };
    static int flips[32][24];
    for (int i = 0; i < 32; i++)
        for (int o = 0; o < 24; o++)
            flips[i][o] = 0;
    Rng rng;
    rng_seed(&rng, key);
    for (int trial = 0; trial < TRIALS; trial++) {
        const uint32_t e = (uint32_t)rng_next(&rng);
        for (int i = 0; i < 32; i++) {
            const uint32_t diff = hash_bits24(key, e) ^ hash_bits24(key, e ^ (1u << i));
            for (int o = 0; o < 24; o++)
                flips[i][o] += (diff >> o) & 1;
        }
    }
    double worst = 0.0;
    int worst_in = 0, worst_out = 0;
    for (int i = 0; i < 32; i++)
        for (int o = 0; o < 24; o++) {
            const double dev = fabs(flips[i][o] / (double)TRIALS - 0.5);
            if (dev > worst)
                worst = dev, worst_in = i, worst_out = o;
        }
    /* sd of a flip rate 0.5/sqrt(TRIALS) = 0.002 over random indices; of 768 pairs the worst
     * stays < 5 sd */
    CHECK(t, worst < 5 * 0.5 / sqrt((double)TRIALS),
          "avalanche: every index bit flips every output bit half the time (worst: index bit %d -> "
          "output bit %d, |rate - 0.5| = %.4f)",
          worst_in, worst_out, worst);
}

int main(void) {
    TestTally t = {0};
    const uint64_t seeds[] = {1, 42, 0xdeadbeefULL};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        const uint64_t key = hash_key(seeds[s], 7, 2);
        check_uniform(&t, key);
        check_independent(&t, seeds[s]);
        check_avalanche(&t, key);
    }
    CHECK(&t, dropout_indices_fit((uint64_t)UINT32_MAX + 1) && !dropout_indices_fit((uint64_t)UINT32_MAX + 2),
          "dropout_indices_fit: at most 2^32 elements per key");
    return tally_exit(&t);
}
