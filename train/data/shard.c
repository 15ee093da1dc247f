/* MD5 and the loading of old-format (in-memory) shards (format in corpus.h). */
#include "train/data/shard.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "core/rng.h"
#include "train/data/tokenizer.h"


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

void shard_path(char *out, size_t size, const char *shard_dir, const char *split) {
    int n = snprintf(out, size, "%s/%s.h5", shard_dir, split);
    RP_CHECK(n > 0 && (size_t)n < size, "[data] shard_dir: path too long: %s", shard_dir);
}

/* ---- loading --------------------------------------------------------------------------------- */

static int64_t dataset_length(hid_t f, const char *path, const char *name) {
    hsize_t dims[4];
    int rank = h5_shape(f, path, name, dims);
    RP_CHECK(rank == 1, "%s: dataset '%s': expected rank 1, got rank %d", path, name, rank);
    return (int64_t)dims[0];
}

/* offsets[0] = 0 < offsets[1] < ... < offsets[n] = total */
static void check_offsets(const int64_t *off, int64_t n, int64_t total, const char *path,
                          const char *name, const char *what) {
    RP_CHECK(off[0] == 0, "%s: dataset '%s': expected to start at 0, got %lld", path, name,
             (long long)off[0]);
    for (int64_t i = 0; i < n; i++)
        RP_CHECK(off[i + 1] > off[i], "%s: dataset '%s': %s %lld is empty or offsets decrease",
                 path, name, what, (long long)i);
    RP_CHECK(off[n] == total, "%s: dataset '%s': expected to end at %lld, got %lld", path, name,
             (long long)total, (long long)off[n]);
}

Shard *shard_load(const char *path) {
    Shard *s = xcalloc(1, sizeof *s);
    RP_CHECK(strlen(path) < sizeof s->path, "%s: path too long", path);
    strcpy(s->path, path);
    hid_t f = h5_open(path, 0);
    char *format = h5_attr_read_string(f, "format", path);
    RP_CHECK(!strcmp(format, SHARD_FORMAT),
             "%s: attribute 'format': expected '%s' (a file written by realpos prepare), got '%s'",
             path, SHARD_FORMAT, format);
    free(format);
    int64_t vocab_size = h5_attr_read_int64(f, "vocab_size", path);
    RP_CHECK(vocab_size > 0 && vocab_size <= INT32_MAX,
             "%s: attribute 'vocab_size': expected a positive int, got %lld", path,
             (long long)vocab_size);
    s->vocab_size = (int)vocab_size;
    s->do_lower_case = h5_attr_read_int64(f, "do_lower_case", path) != 0;
    char *md5 = h5_attr_read_string(f, "vocab_md5", path);
    RP_CHECK(strlen(md5) == 32, "%s: attribute 'vocab_md5': expected 32 hex digits, got '%s'", path,
             md5);
    memcpy(s->vocab_md5, md5, 33);
    free(md5);
    s->sources = h5_attr_read_string(f, "sources", path);

    s->num_tokens = dataset_length(f, path, "tokens");
    s->num_sentences = dataset_length(f, path, "sentence_offsets") - 1;
    s->num_documents = dataset_length(f, path, "document_offsets") - 1;
    RP_CHECK(s->num_sentences >= 0 && s->num_documents >= 0,
             "%s: datasets 'sentence_offsets' and 'document_offsets' need at least one element",
             path);
    hsize_t n_tok = (hsize_t)s->num_tokens, n_sent = (hsize_t)s->num_sentences + 1,
            n_doc = (hsize_t)s->num_documents + 1;
    s->tokens = xmalloc((size_t)n_tok * sizeof *s->tokens);
    s->sentence_offsets = xmalloc((size_t)n_sent * sizeof *s->sentence_offsets);
    s->document_offsets = xmalloc((size_t)n_doc * sizeof *s->document_offsets);
    h5_read_ints(f, path, "tokens", s->tokens, 1, &n_tok);
    h5_read_int64s(f, path, "sentence_offsets", s->sentence_offsets, 1, &n_sent);
    h5_read_int64s(f, path, "document_offsets", s->document_offsets, 1, &n_doc);
    h5_close(f, path);

    for (int64_t i = 0; i < s->num_tokens; i++)
        RP_CHECK(s->tokens[i] >= 0 && s->tokens[i] < s->vocab_size,
                 "%s: dataset 'tokens': expected ids in [0, %d), got %d at index %lld", path,
                 s->vocab_size, s->tokens[i], (long long)i);
    check_offsets(s->sentence_offsets, s->num_sentences, s->num_tokens, path, "sentence_offsets",
                  "sentence");
    check_offsets(s->document_offsets, s->num_documents, s->num_sentences, path, "document_offsets",
                  "document");
    return s;
}

void shard_free(Shard *s) {
    if (!s)
        return;
    free(s->tokens);
    free(s->sentence_offsets);
    free(s->document_offsets);
    free(s->sources);
    shard_files_release(s->files);
    free(s->parts);
    free(s->token_counts);
    free(s);
}

void shard_check_vocab(const Shard *s, const char *vocab_text, size_t len, int do_lower_case,
                       const char *vocab_origin) {
    char md5[33];
    md5_hex(vocab_text, len, md5);
    RP_CHECK(
        !strcmp(md5, s->vocab_md5),
        "%s: made with another vocabulary (md5 %s) than %s (md5 %s): run realpos prepare again",
        s->path, s->vocab_md5, vocab_origin, md5);
    RP_CHECK(!do_lower_case == !s->do_lower_case,
             "%s: made with do_lower_case = %s, but %s is used with do_lower_case = %s: run "
             "realpos prepare "
             "again",
             s->path, s->do_lower_case ? "yes" : "no", vocab_origin, do_lower_case ? "yes" : "no");
}

int shard_most_frequent_token(const Shard *shard, SpecialTokens sp) {
    int64_t *counts = xcalloc((size_t)shard->vocab_size, sizeof *counts);
    if (shard->token_counts)
        memcpy(counts, shard->token_counts, (size_t)shard->vocab_size * sizeof *counts);
    else
        for (int64_t e = 0; e < shard->num_tokens; e++)
            counts[shard->tokens[e]]++;
    counts[sp.pad] = counts[sp.unk] = counts[sp.cls] = counts[sp.sep] = counts[sp.mask] = -1;
    int best = 0;
    for (int v = 1; v < shard->vocab_size; v++)
        if (counts[v] > counts[best])
            best = v;
    free(counts);
    return best;
}
