/* Corpus input streams and corpus list expansion (corpus_reader.h). */
#include "train/data/corpus_reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/common.h"

#define COMPRESSED_BUFFER (1 << 20) /* compressed bytes read per refill (zstd) */

static void *resize(void *p, size_t bytes) {
    p = realloc(p, bytes);
    RP_CHECK(p, "out of memory listing the corpus files (%zu bytes)", bytes);
    return p;
}

struct CorpusReader {
    char path[CONFIG_PATH_MAX];
    Compression compression;
    int fd;                 /* plain and zstd */
    gzFile gz;              /* gzip (zlib reads concatenated members too) */
    ZSTD_DCtx *zstd;
    ZSTD_inBuffer in;       /* zstd: compressed bytes not yet consumed */
    unsigned char *in_data; /* [COMPRESSED_BUFFER] */
    size_t frame_hint;      /* zstd: 0 once the last frame ended cleanly */
    int eof;
};

const char *compression_name(Compression c) {
    return c == COMPRESSION_GZIP ? "gzip" : c == COMPRESSION_ZSTD ? "zstd" : "plain";
}

CorpusReader *corpus_reader_open(const char *path) {
    CorpusReader *r = xcalloc(1, sizeof *r);
    RP_CHECK(strlen(path) < sizeof r->path, "%s: corpus path too long", path);
    strcpy(r->path, path);
    r->fd = open(path, O_RDONLY);
    RP_CHECK(r->fd >= 0, "%s: cannot open corpus file ([data] corpus): %s", path, strerror(errno));
    unsigned char magic[4] = {0};
    ssize_t got = pread(r->fd, magic, sizeof magic, 0);
    RP_CHECK(got >= 0, "%s: cannot read corpus file: %s", path, strerror(errno));
    if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        r->compression = COMPRESSION_GZIP;
        r->gz = gzdopen(r->fd, "rb");
        RP_CHECK(r->gz, "%s: cannot open as gzip", path);
        gzbuffer(r->gz, 1 << 18);
    } else if (got == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f &&
               magic[3] == 0xfd) {
        r->compression = COMPRESSION_ZSTD;
        r->zstd = ZSTD_createDCtx();
        r->in_data = xmalloc(COMPRESSED_BUFFER);
        r->in = (ZSTD_inBuffer){r->in_data, 0, 0};
        RP_CHECK(r->zstd, "%s: out of memory for a zstd decoder", path);
    }
    return r;
}

Compression corpus_reader_compression(const CorpusReader *r) { return r->compression; }

static size_t read_zstd(CorpusReader *r, char *buf, size_t cap) {
    ZSTD_outBuffer out = {buf, cap, 0};
    while (out.pos == 0 && !r->eof) {
        if (r->in.pos == r->in.size) {
            ssize_t got = read(r->fd, r->in_data, COMPRESSED_BUFFER);
            RP_CHECK(got >= 0, "%s: read error: %s", r->path, strerror(errno));
            if (got == 0) {
                RP_CHECK(r->frame_hint == 0,
                         "%s: truncated zstd data: the stream ends inside a frame", r->path);
                r->eof = 1;
                break;
            }
            r->in = (ZSTD_inBuffer){r->in_data, (size_t)got, 0};
        }
        r->frame_hint = ZSTD_decompressStream(r->zstd, &out, &r->in);
        RP_CHECK(!ZSTD_isError(r->frame_hint), "%s: corrupt zstd data: %s", r->path,
                 ZSTD_getErrorName(r->frame_hint));
    }
    return out.pos;
}

size_t corpus_reader_read(CorpusReader *r, char *buf, size_t cap) {
    if (cap > (1u << 30))
        cap = 1u << 30;
    switch (r->compression) {
    case COMPRESSION_GZIP: {
        int got = gzread(r->gz, buf, (unsigned)cap);
        int err = Z_OK;
        const char *msg = got < 0 ? gzerror(r->gz, &err) : NULL;
        RP_CHECK(got >= 0, "%s: corrupt gzip data: %s", r->path, msg ? msg : "read error");
        if (got == 0) { /* gzread returns 0 at a clean end, and at a truncated one (gzeof set) */
            gzerror(r->gz, &err);
            RP_CHECK(err == Z_OK || err == Z_BUF_ERROR, "%s: corrupt gzip data", r->path);
            RP_CHECK(err != Z_BUF_ERROR, "%s: truncated gzip data: the stream ends early", r->path);
        }
        return (size_t)got;
    }
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
    if (r->gz)
        gzclose(r->gz); /* closes fd */
    else
        close(r->fd);
    ZSTD_freeDCtx(r->zstd);
    free(r->in_data);
    free(r);
}

/* ---- the list of corpus files ---------------------------------------------------------------- */

typedef struct {
    CorpusList list;
    int cap;
    dev_t *dev;
    ino_t *ino;
    const char **entry; /* [data] corpus entry each file came from */
} ListBuilder;

static void add_file(ListBuilder *b, const char *path, const char *entry) {
    struct stat st;
    RP_CHECK(stat(path, &st) == 0, "%s: cannot open corpus file ([data] corpus): %s", path,
             strerror(errno));
    RP_CHECK(S_ISREG(st.st_mode), "%s: corpus entry ([data] corpus) is not a regular file", path);
    RP_CHECK(access(path, R_OK) == 0, "%s: cannot open corpus file ([data] corpus): %s", path,
             strerror(errno));
    for (int i = 0; i < b->list.count; i++)
        RP_CHECK(b->dev[i] != st.st_dev || b->ino[i] != st.st_ino,
                 "[data] corpus lists one file twice: %s (from '%s') and %s (from '%s') are the same "
                 "file (device %llu, inode %llu)",
                 b->list.files[i].path, b->entry[i], path, entry, (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
    if (b->list.count == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->list.files = resize(b->list.files, (size_t)b->cap * sizeof *b->list.files);
        b->dev = resize(b->dev, (size_t)b->cap * sizeof *b->dev);
        b->ino = resize(b->ino, (size_t)b->cap * sizeof *b->ino);
        b->entry = resize(b->entry, (size_t)b->cap * sizeof *b->entry);
    }
    int i = b->list.count++;
    b->list.files[i] = (CorpusFile){xstrdup(path), (int64_t)st.st_size,
                                    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
    b->dev[i] = st.st_dev;
    b->ino[i] = st.st_ino;
    b->entry[i] = entry;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file below dir (names starting with '.' skipped), sorted, into *paths. */
static void walk_directory(const char *dir, char ***paths, int *count, int *cap) {
    DIR *d = opendir(dir);
    RP_CHECK(d, "%s: cannot read corpus directory ([data] corpus): %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *path = xmalloc(n);
        snprintf(path, n, "%s/%s", dir, e->d_name);
        struct stat st;
        RP_CHECK(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            walk_directory(path, paths, count, cap);
            free(path);
        } else if (S_ISREG(st.st_mode)) {
            if (*count == *cap) {
                *cap = *cap ? 2 * *cap : 64;
                *paths = resize(*paths, (size_t)*cap * sizeof **paths);
            }
            (*paths)[(*count)++] = path;
        } else {
            free(path);
        }
    }
    closedir(d);
}

CorpusList corpus_list_expand(const DataConfig *data) {
    ListBuilder b = {0};
    for (int e = 0; e < data->num_corpus; e++) {
        const char *entry = data->corpus[e];
        struct stat st;
        if (strpbrk(entry, "*?[") && stat(entry, &st) != 0) {
            glob_t g;
            int rc = glob(entry, GLOB_ERR, NULL, &g);
            RP_CHECK(rc == 0, "[data] corpus: '%s' matches no file", entry);
            for (size_t i = 0; i < g.gl_pathc; i++)
                add_file(&b, g.gl_pathv[i], entry); /* glob sorts */
            globfree(&g);
        } else if (stat(entry, &st) == 0 && S_ISDIR(st.st_mode)) {
            char **paths = NULL;
            int count = 0, cap = 0;
            walk_directory(entry, &paths, &count, &cap);
            RP_CHECK(count > 0, "%s: corpus directory ([data] corpus) holds no file", entry);
            qsort(paths, (size_t)count, sizeof *paths, compare_strings);
            for (int i = 0; i < count; i++) {
                add_file(&b, paths[i], entry);
                free(paths[i]);
            }
            free(paths);
        } else {
            add_file(&b, entry, entry);
        }
    }
    free(b.dev), free(b.ino), free(b.entry);
    return b.list;
}

void corpus_list_free(CorpusList *list) {
    for (int i = 0; i < list->count; i++)
        free(list->files[i].path);
    free(list->files);
    *list = (CorpusList){0};
}
