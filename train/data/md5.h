/* MD5 of a byte string (RFC 1321): the identity of a vocabulary file that shards and checkpoints
 * record (`md5sum` prints the same). */
#pragma once
#include <stddef.h>

/* MD5 of a byte string as 32 lower-case hex digits and a terminating NUL. */
void md5_hex(const void *data, size_t len, char out[33]);
