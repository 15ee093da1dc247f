/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320: the value of zlib's crc32 and Python's
 * zlib.crc32), table-driven 8 bytes at a time. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t table[8][256];
} Crc32Tables;

void crc32_tables_init(Crc32Tables *t);
/* Continue crc (0 for a new stream) over bytes [data, data + n). */
uint32_t crc32_update(const Crc32Tables *t, uint32_t crc, const void *data, size_t n);
