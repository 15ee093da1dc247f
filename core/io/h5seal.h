/* The seal of every HDF5 file realpos writes: a 512-byte user block holding a CRC-32 of the rest
 * of the file (h5seal.c, docs/checkpoint.md), written when h5io.h closes a file it wrote and
 * verified before libhdf5 reads a byte: libhdf5 cannot be trusted with a corrupt file (it crashes
 * or loops). */
#pragma once
#include <stddef.h>

#define H5_USER_BLOCK 512

typedef enum { H5_SEAL_OK, H5_SEAL_ABSENT, H5_SEAL_BAD } H5SealStatus;
/* Verify path's checksum; why receives the verdict ("CRC-32 ... verified", "corrupt: ..."). */
H5SealStatus h5_check_seal(const char *path, char *why, size_t why_size);
/* The same through an open descriptor; whole = 0 checks only the header and that the file has the
 * length it records (one 512-byte read: catches truncation and extension, not corruption). */
H5SealStatus h5_check_seal_fd(int fd, int whole, char *why, size_t why_size);
/* Write the checksum of a closed file created by h5_create (fatal, removing it, on failure). */
void h5_seal(const char *path);
