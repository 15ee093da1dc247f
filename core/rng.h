/* Random numbers.
 * Rng: xoshiro256** stream for initialisation, data order and masking (state is 4 words, saved in
 *      checkpoints for exact resume).
 * hash_uniform: counter-based uniform in [0,1) from (key, index): dropout masks are a pure function
 *      of (seed, step, site, element), so backward regenerates them instead of storing them and
 *      results do not depend on the thread count. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} Rng;

void rng_seed(Rng *rng, uint64_t seed);
uint64_t rng_next(Rng *rng);
/* uniform in [0, 1) with 24 random bits */
float rng_uniform(Rng *rng);
/* uniform integer in [0, n) */
uint64_t rng_below(Rng *rng, uint64_t n);
/* standard normal (Box-Muller, double precision internally) */
double rng_normal(Rng *rng);

static inline uint64_t hash64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Key for a dropout site: mixes seed, step and a site id (layer * 8 + site). */
/* 64-bit hash of a byte string: each 8-byte word (the tail zero-padded) mixed through hash64. */
uint64_t hash_bytes(const void *data, size_t n);

static inline uint64_t hash_key(uint64_t seed, uint64_t step, uint64_t site) {
    return hash64(hash64(hash64(seed) ^ step) ^ site);
}

/* A bijection of 32-bit words, xorshift-multiply (the constants of C. Wellons' "lowbias32"). */
static inline uint32_t mix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352dU;
    h ^= h >> 15;
    h *= 0x846ca68bU;
    return h ^ (h >> 16);
}

/* The 24 random bits of element `index` under `key`: hash_uniform = hash_bits24 * 2^-24.
 * mix32(mix32(index ^ key_lo) ^ key_hi): 32-bit lanes only, so a mask loop runs 8 elements per
 * AVX2 instruction (the 64-bit splitmix form took twice as long per element, being emulated
 * with 32-bit multiplies). A key covers at most 2^32 elements: every dropout site checks its
 * size (dropout_indices_fit). */
static inline uint32_t hash_bits24(uint64_t key, uint32_t index) {
    return mix32(mix32(index ^ (uint32_t)key) ^ (uint32_t)(key >> 32)) >> 8;
}

/* Whether n elements fit the 32-bit element index of one dropout key. */
static inline int dropout_indices_fit(uint64_t n) { return n <= (uint64_t)UINT32_MAX + 1; }

static inline float hash_uniform(uint64_t key, uint32_t index) {
    return (float)hash_bits24(key, index) * (1.0f / 16777216.0f);
}

/* hash_uniform(key, i) >= p  <=>  hash_bits24(key, i) >= hash_threshold(p), exactly, for p in
 * [0, 1]: b * 2^-24 >= p <=> b >= p * 2^24 (exact in float) <=> b >= ceil(p * 2^24) for an
 * integer b. The integer form vectorises without AVX-512 (no 64-bit int -> float conversion). */
static inline uint32_t hash_threshold(float p) {
    const float scaled = p * 16777216.0f;
    const uint32_t whole = (uint32_t)scaled;
    return whole + ((float)whole < scaled);
}
