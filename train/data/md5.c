/* MD5 (RFC 1321), for the vocabulary's identity (md5.h). */
#include "train/data/md5.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- MD5 (RFC 1321) -------------------------------------------------------------------------- */

static uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }
/* One 64-byte block: four rounds of 16 steps, a = b + ((a + F(b,c,d) + K[i] + M[g]) <<< s). */
static void md5_block(uint32_t h[4], const unsigned char *p, const uint32_t k[64]) {
    static const int shift[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
    uint32_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        switch (i / 16) {
        case 0:
            f = (b & c) | (~b & d);
            g = i;
            break;
        case 1:
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
            break;
        case 2:
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
            break;
        default:
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
            break;
        }
        f += a + k[i] + m[g];
        a = d;
        d = c;
        c = b;
        b += rotl32(f, shift[i / 16 * 4 + i % 4]);
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

void md5_hex(const void *data, size_t len, char out[33]) {
    uint32_t k[64]; /* K[i] = floor(|sin(i + 1)| * 2^32) */
    for (int i = 0; i < 64; i++)
        k[i] = (uint32_t)(fabs(sin((double)(i + 1))) * 4294967296.0);
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    const unsigned char *bytes = data;
    size_t full = len / 64 * 64;
    for (size_t off = 0; off < full; off += 64)
        md5_block(h, bytes + off, k);
    /* Padding: 0x80, zeros to 56 mod 64, then the bit length as 64-bit little-endian. */
    unsigned char tail[128] = {0};
    size_t rest = len - full, tail_len = rest < 56 ? 64 : 128;
    if (rest)
        memcpy(tail, bytes + full, rest);
    tail[rest] = 0x80;
    for (int i = 0; i < 8; i++)
        tail[tail_len - 8 + (size_t)i] = (unsigned char)(((uint64_t)len * 8) >> (8 * i));
    for (size_t off = 0; off < tail_len; off += 64)
        md5_block(h, tail + off, k);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", (unsigned)(h[i / 4] >> (8 * (i % 4))) & 0xffu);
}
