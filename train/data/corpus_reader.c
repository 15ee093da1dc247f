/* Corpus input streams and the format of a file (corpus_reader.h; the corpus list: corpus_list.c). */
#include "train/data/corpus_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/common.h"

#define COMPRESSED_BUFFER (1 << 20) /* compressed bytes read per refill (gzip, zstd) */

struct CorpusReader {
    char path[CONFIG_PATH_MAX];
    Compression compression;
    int fd;
    unsigned char *in_data; /* [COMPRESSED_BUFFER] compressed bytes read ahead (gzip, zstd) */
    int64_t in_offset;      /* file offset of in_data[0] */
    z_stream gz;            /* gzip: inflate over one member after another */
    int gz_live;
    int gz_between;         /* 1 after a member's end until the next one's first byte */
    ZSTD_DCtx *zstd;
    ZSTD_inBuffer in;       /* zstd: compressed bytes not yet consumed */
    size_t frame_hint;      /* zstd: 0 once the last frame ended cleanly */
    int eof;
};

const char *corpus_reader_compression_name(Compression c) {
    return c == COMPRESSION_GZIP ? "gzip" : c == COMPRESSION_ZSTD ? "zstd" : "plain";
}

/* Formats recognised by their magic bytes and refused by name: realpos decodes gzip and zstd. */
static const struct {
    const char *name, *command;
    size_t len;
    const unsigned char magic[6];
} refused_formats[] = {
    {"xz", "xz -dc", 6, {0xFD, '7', 'z', 'X', 'Z', 0x00}},
    {"7-Zip", "7z x", 6, {'7', 'z', 0xBC, 0xAF, 0x27, 0x1C}},
    {"lz4", "lz4 -dc", 4, {0x04, 0x22, 0x4D, 0x18}},
    {"zip", "unzip -p", 4, {'P', 'K', 0x03, 0x04}},
    {"lzip", "lzip -dc", 5, {'L', 'Z', 'I', 'P', 0x01}},
};

/* bzip2: "BZh", the block size 1-9, then a block's magic (the digits of pi) or the end of stream's
 * (those of sqrt(pi)): ten bytes no text begins with. */
static int is_bzip2(const unsigned char *m, size_t n) {
    static const unsigned char block[6] = {0x31, 0x41, 0x59, 0x26, 0x53, 0x59}, end[6] = {0x17, 0x72, 0x45, 0x38, 0x50, 0x90};
    return n >= 10 && m[0] == 'B' && m[1] == 'Z' && m[2] == 'h' && m[3] >= '1' && m[3] <= '9' &&
           (!memcmp(m + 4, block, 6) || !memcmp(m + 4, end, 6));
}

/* zstd frame (28 b5 2f fd) or skippable frame (5? 2a 4d 18, as pzstd and seekable zstd begin). */
static int is_zstd(const unsigned char *m, size_t n) {
    return n >= 4 && ((m[0] == 0x28 && m[1] == 0xB5 && m[2] == 0x2F && m[3] == 0xFD) ||
                      ((m[0] & 0xF0) == 0x50 && m[1] == 0x2A && m[2] == 0x4D && m[3] == 0x18));
}

CorpusReader *corpus_reader_open(const char *path) {
    CorpusReader *r = xcalloc(1, sizeof *r);
    RP_CHECK(strlen(path) < sizeof r->path, "%s: corpus path too long", path);
    strcpy(r->path, path);
    r->fd = open(path, O_RDONLY);
    RP_CHECK(r->fd >= 0, "%s: cannot open corpus file ([data] corpus): %s", path, strerror(errno));
    unsigned char magic[10] = {0};
    ssize_t got = pread(r->fd, magic, sizeof magic, 0);
    RP_CHECK(got >= 0, "%s: cannot read corpus file: %s", path, strerror(errno));
    size_t n = (size_t)got;
    for (size_t i = 0; i < sizeof refused_formats / sizeof *refused_formats; i++)
        RP_CHECK(n < refused_formats[i].len || memcmp(magic, refused_formats[i].magic, refused_formats[i].len),
                 "%s: %s compressed data (by its first bytes): realpos reads plain text, gzip and zstd; decompress "
                 "it first, e.g. %s FILE | zstd -o FILE.zst", path, refused_formats[i].name, refused_formats[i].command);
    RP_CHECK(!is_bzip2(magic, n), "%s: bzip2 compressed data (by its first bytes): realpos reads plain text, gzip "
             "and zstd; decompress it first, e.g. bzip2 -dc FILE | zstd -o FILE.zst", path);
    static const unsigned char zstd_magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    RP_CHECK(!(n == 1 && magic[0] == 0x1F) && !(n >= 1 && n < 4 && !memcmp(magic, zstd_magic, n)),
             "%s: %zu byte%s that begin%s a %s header: a truncated compressed file", path, n, n == 1 ? "" : "s",
             n == 1 ? "s" : "", magic[0] == 0x1F ? "gzip" : "zstd");
    if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        r->compression = COMPRESSION_GZIP;
        RP_CHECK(inflateInit2(&r->gz, 16 + MAX_WBITS) == Z_OK, "%s: out of memory for a gzip decoder", path);
        r->gz_live = 1;
    } else if (is_zstd(magic, n)) {
        r->compression = COMPRESSION_ZSTD;
        r->zstd = ZSTD_createDCtx();
        RP_CHECK(r->zstd, "%s: out of memory for a zstd decoder", path);
        r->in = (ZSTD_inBuffer){NULL, 0, 0};
    }
    if (r->compression != COMPRESSION_NONE)
        r->in_data = xmalloc(COMPRESSED_BUFFER);
    return r;
}

Compression corpus_reader_compression(const CorpusReader *r) { return r->compression; }

/* The next compressed bytes into in_data; their number, 0 at the end of the file. */
static size_t refill(CorpusReader *r, size_t consumed_before) {
    r->in_offset += (int64_t)consumed_before;
    ssize_t got;
    do
        got = read(r->fd, r->in_data, COMPRESSED_BUFFER);
    while (got < 0 && errno == EINTR);
    RP_CHECK(got >= 0, "%s: read error: %s", r->path, strerror(errno));
    return (size_t)got;
}

static size_t read_zstd(CorpusReader *r, char *buf, size_t cap) {
    ZSTD_outBuffer out = {buf, cap, 0};
    while (out.pos == 0 && !r->eof) {
        if (r->in.pos == r->in.size) {
            size_t got = refill(r, r->in.size);
            if (got == 0) {
                RP_CHECK(r->frame_hint == 0,
                         "%s: truncated zstd data: the stream ends inside a frame", r->path);
                r->eof = 1;
                break;
            }
            r->in = (ZSTD_inBuffer){r->in_data, got, 0};
        }
        r->frame_hint = ZSTD_decompressStream(r->zstd, &out, &r->in);
        RP_CHECK(!ZSTD_isError(r->frame_hint), "%s: corrupt zstd data (at or after byte %lld): %s", r->path,
                 (long long)(r->in_offset + (int64_t)r->in.pos), ZSTD_getErrorName(r->frame_hint));
    }
    return out.pos;
}

/* Members one after another, as gzip -d reads them; after the last, only zero bytes (which
 * gzip -d ignores too). */
static size_t read_gzip(CorpusReader *r, char *buf, size_t cap) {
    z_stream *z = &r->gz;
    z->next_out = (Bytef *)buf;
    z->avail_out = (uInt)cap;
    while (z->avail_out == cap && !r->eof) {
        if (z->avail_in == 0) {
            size_t got = refill(r, (size_t)(z->next_in ? z->next_in - r->in_data : 0));
            if (got == 0) {
                RP_CHECK(r->gz_between, "%s: truncated gzip data: the stream ends early", r->path);
                r->eof = 1;
                break;
            }
            z->next_in = r->in_data;
            z->avail_in = (uInt)got;
        }
        if (r->gz_between) { /* zeros are padding; anything else must begin a member */
            while (z->avail_in && *z->next_in == 0)
                z->next_in++, z->avail_in--;
            if (!z->avail_in)
                continue;
            int64_t at = r->in_offset + (z->next_in - r->in_data);
            RP_CHECK(*z->next_in == 0x1f, "%s: trailing data after the gzip stream at byte %lld (byte 0x%02x; gzip -d "
                     "rejects it too): truncate the file there, or recompress it", r->path, (long long)at, *z->next_in);
            RP_CHECK(inflateReset(z) == Z_OK, "%s: gzip decoder reset failed", r->path);
            r->gz_between = 0;
        }
        int64_t at = r->in_offset + (z->next_in - r->in_data);
        int rc = inflate(z, Z_NO_FLUSH);
        RP_CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR, "%s: corrupt gzip data (at or after byte %lld): %s",
                 r->path, (long long)at, z->msg ? z->msg : "inflate failed");
        if (rc == Z_STREAM_END)
            r->gz_between = 1;
    }
    return cap - z->avail_out;
}

size_t corpus_reader_read(CorpusReader *r, char *buf, size_t cap) {
    if (cap > (1u << 30))
        cap = 1u << 30;
    switch (r->compression) {
    case COMPRESSION_GZIP:
        return read_gzip(r, buf, cap);
    case COMPRESSION_ZSTD:
        return read_zstd(r, buf, cap);
    default: {
        ssize_t got;
        do
            got = read(r->fd, buf, cap);
        while (got < 0 && errno == EINTR);
        RP_CHECK(got >= 0, "%s: read error: %s", r->path, strerror(errno));
        return (size_t)got;
    }
    }
}

void corpus_reader_close(CorpusReader *r) {
    if (!r)
        return;
    if (r->gz_live)
        inflateEnd(&r->gz);
    close(r->fd);
    ZSTD_freeDCtx(r->zstd);
    free(r->in_data);
    free(r);
}

/* ---- the format of a file ----------------------------------------------------------------- */

static int ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && !strncasecmp(s + n - k, suffix, k);
}

int corpus_reader_is_jsonl(const DataConfig *data, const char *path) {
    if (data->corpus_format != CORPUS_AUTO)
        return data->corpus_format == CORPUS_JSONL;
    static const char *const compressed[] = {".gz", ".gzip", ".zst", ".zstd", ".bz2", ".xz"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof compressed / sizeof *compressed; i++)
        if (ends_with(path, n, compressed[i])) {
            n -= strlen(compressed[i]);
            break;
        }
    return ends_with(path, n, ".jsonl") || ends_with(path, n, ".json") || ends_with(path, n, ".ndjson");
}
