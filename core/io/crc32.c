#include "core/io/crc32.h"

#include <string.h>

/* table[0][b] = CRC of the single byte b; table[k][b] = CRC of b followed by k zero bytes, so
 * eight table lookups advance the register over eight bytes ("slicing-by-8"). */
void crc32_tables_init(Crc32Tables *t) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int bit = 0; bit < 8; bit++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        t->table[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++)
            t->table[k][b] = (t->table[k - 1][b] >> 8) ^ t->table[0][t->table[k - 1][b] & 0xFF];
}

uint32_t crc32_update(const Crc32Tables *t, uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi; /* little-endian words; x86-64 and aarch64 are little-endian */
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = t->table[7][lo & 0xFF] ^ t->table[6][(lo >> 8) & 0xFF] ^ t->table[5][(lo >> 16) & 0xFF] ^
            t->table[4][lo >> 24] ^ t->table[3][hi & 0xFF] ^ t->table[2][(hi >> 8) & 0xFF] ^
            t->table[1][(hi >> 16) & 0xFF] ^ t->table[0][hi >> 24];
    }
    for (; n; n--, p++)
        c = (c >> 8) ^ t->table[0][(c ^ *p) & 0xFF];
    return ~c;
}
