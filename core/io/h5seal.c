/* The realpos checksum of an HDF5 file, kept in its 512-byte user block (docs/checkpoint.md):
 *   "realpos-checksum 1\ncrc32 XXXXXXXX\nbytes N\n", NUL-padded to 512 bytes,
 * where N is the length of the HDF5 body [512, EOF) and the CRC-32 covers exactly those bytes.
 * Verified by one sequential read before libhdf5 sees the file. */
#define _POSIX_C_SOURCE 200809L
#include "core/io/h5seal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/crc32.h"

static const char SEAL_MAGIC[] = "realpos-checksum 1\n";
static const unsigned char HDF5_SIGNATURE[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* CRC-32 of bytes [offset, EOF) of fd; returns -1 (errno set) on a read error. */
static int crc_from(int fd, off_t offset, uint32_t *crc, uint64_t *bytes) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = xmalloc(CHUNK);
    Crc32Tables *tables = xmalloc(sizeof *tables);
    crc32_tables_init(tables);
    uint32_t c = 0;
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t got = pread(fd, buf, CHUNK, offset + (off_t)total);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = -1;
            break;
        }
        if (got == 0)
            break;
        c = crc32_update(tables, c, buf, (size_t)got);
        total += (uint64_t)got;
    }
    free(tables);
    free(buf);
    *crc = c;
    *bytes = total;
    return rc;
}

static void seal_failed(const char *path, int fd, const char *what, int err) {
    close(fd);
    unlink(path);
    RP_FATAL("%s: cannot %s (%s); removed the incomplete file", path, what, strerror(err));
}

void h5_seal(const char *path) {
    int fd = open(path, O_RDWR);
    RP_CHECK(fd >= 0, "%s: cannot reopen to write its checksum: %s", path, strerror(errno));
    uint32_t crc;
    uint64_t bytes;
    if (crc_from(fd, H5_USER_BLOCK, &crc, &bytes) != 0)
        seal_failed(path, fd, "read back the written file", errno);
    char header[H5_USER_BLOCK];
    memset(header, 0, sizeof header);
    snprintf(header, sizeof header, "%scrc32 %08" PRIx32 "\nbytes %" PRIu64 "\n", SEAL_MAGIC, crc, bytes);
    if (pwrite(fd, header, sizeof header, 0) != (ssize_t)sizeof header)
        seal_failed(path, fd, "write the checksum", errno ? errno : EIO);
    if (fsync(fd) != 0)
        seal_failed(path, fd, "flush the file to disk", errno);
    if (close(fd) != 0) {
        int err = errno;
        unlink(path);
        RP_FATAL("%s: cannot close (%s); removed the incomplete file", path, strerror(err));
    }
}

H5SealStatus h5_check_seal_fd(int fd, int whole, char *why, size_t why_size) {
    why[0] = '\0';
    char header[H5_USER_BLOCK + 1];
    ssize_t got = pread(fd, header, H5_USER_BLOCK, 0);
    struct stat st;
    H5SealStatus status = H5_SEAL_BAD;
    uint32_t want_crc, crc;
    uint64_t want_bytes, bytes;
    if (got < 0 || fstat(fd, &st) != 0) {
        snprintf(why, why_size, "cannot read: %s", strerror(errno));
    } else if (got >= 8 && !memcmp(header, HDF5_SIGNATURE, 8)) {
        snprintf(why, why_size, "has no realpos checksum (an HDF5 file without a user block)");
        status = H5_SEAL_ABSENT;
    } else if (got < (ssize_t)sizeof SEAL_MAGIC - 1 || memcmp(header, SEAL_MAGIC, sizeof SEAL_MAGIC - 1)) {
        snprintf(why, why_size, "not a readable HDF5 file: neither a realpos checksum header nor an HDF5 "
                                "signature at its start (%lld bytes)", (long long)st.st_size);
    } else if (got < H5_USER_BLOCK) {
        snprintf(why, why_size, "truncated: %lld bytes, shorter than its %d-byte checksum header",
                 (long long)st.st_size, H5_USER_BLOCK);
    } else {
        header[H5_USER_BLOCK] = '\0';
        if (sscanf(header + sizeof SEAL_MAGIC - 1, "crc32 %8" SCNx32 "\nbytes %" SCNu64, &want_crc,
                   &want_bytes) != 2) {
            snprintf(why, why_size, "damaged checksum header in its first %d bytes", H5_USER_BLOCK);
        } else if ((uint64_t)st.st_size != H5_USER_BLOCK + want_bytes) {
            snprintf(why, why_size, "%s: %lld bytes, but its checksum header records %" PRIu64 " + %d",
                     (uint64_t)st.st_size < H5_USER_BLOCK + want_bytes ? "truncated" : "extended",
                     (long long)st.st_size, want_bytes, H5_USER_BLOCK);
        } else if (!whole) {
            snprintf(why, why_size, "checksum header and length (%" PRIu64 " bytes) verified", want_bytes);
            status = H5_SEAL_OK;
        } else if (crc_from(fd, H5_USER_BLOCK, &crc, &bytes) != 0) {
            snprintf(why, why_size, "read error: %s", strerror(errno));
        } else if (crc != want_crc || bytes != want_bytes) {
            snprintf(why, why_size, "corrupt: CRC-32 of its %" PRIu64 " bytes after the header is %08" PRIx32
                     ", the header records %08" PRIx32, bytes, crc, want_crc);
        } else {
            snprintf(why, why_size, "CRC-32 %08" PRIx32 " over %" PRIu64 " bytes verified", crc, bytes);
            status = H5_SEAL_OK;
        }
    }
    return status;
}

H5SealStatus h5_check_seal(const char *path, char *why, size_t why_size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(why, why_size, "cannot open: %s", strerror(errno));
        return H5_SEAL_BAD;
    }
    H5SealStatus status = h5_check_seal_fd(fd, 1, why, why_size);
    close(fd);
    return status;
}
