#include "core/rng.h"

#include <math.h>
#include <string.h>

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(Rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        x += 0x9e3779b97f4a7c15ULL;
        rng->s[i] = hash64(x);
    }
}

uint64_t rng_next(Rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float rng_uniform(Rng *rng) { return (float)(rng_next(rng) >> 40) * (1.0f / 16777216.0f); }

uint64_t rng_below(Rng *rng, uint64_t n) {
    /* Lemire's multiply-shift; bias is below 2^-64 * n, negligible for our n. */
    return (uint64_t)(((__uint128_t)rng_next(rng) * n) >> 64);
}

double rng_normal(Rng *rng) {
    double u1 = ((double)(rng_next(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double u2 = (double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t hash_bytes(const void *data, size_t n) {
    const char *p = data;
    uint64_t h = hash64(n ^ 0x736861726473ULL);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        h = hash64(h ^ w);
    }
    return h;
}
