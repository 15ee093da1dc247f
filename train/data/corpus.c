/* Corpus preparation and shard loading (format in corpus.h). */
#include "train/data/corpus.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/h5io.h"
#include "core/rng.h"
#include "train/data/tokenizer.h"

/* Salt of the RNG that picks the held-out documents (the instance streams use other salts). */
#define SPLIT_SALT 0x73706c6974ULL /* "split" */
/* Lines per tokenization work item. */
#define CHUNK_LINES 512

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

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct {
    const char *text;
    size_t len;
    int64_t doc; /* document index over all corpus files */
} Line;

typedef struct {
    Line *lines;
    int64_t num_lines, cap_lines, num_docs;
} LineList;

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\f\v", s[i]))
            return 0;
    return 1;
}

/* Append the non-blank lines of one file; a blank line or the end of the file ends a document. */
static void split_lines(LineList *out, const char *text, size_t len) {
    int open = 0;
    for (size_t start = 0; start < len;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (is_blank(text + start, end - start)) {
            out->num_docs += open;
            open = 0;
        } else {
            if (out->num_lines == out->cap_lines) {
                out->cap_lines = out->cap_lines ? 2 * out->cap_lines : 4096;
                out->lines = realloc(out->lines, (size_t)out->cap_lines * sizeof *out->lines);
                RP_CHECK(out->lines, "out of memory reading the corpus");
            }
            out->lines[out->num_lines++] = (Line){text + start, end - start, out->num_docs};
            open = 1;
        }
        start = end + 1;
    }
    out->num_docs += open;
}

/* ---- tokenization ---------------------------------------------------------------------------- */

typedef struct {
    int *ids;
    size_t used, cap;
} IdBuffer;

/* Tokenize every line. Work items of CHUNK_LINES lines each fill their own buffer, so the result
 * is the same for any thread count and schedule. Line i's ids are chunk[i / CHUNK_LINES].ids +
 * start[i], count[i] of them. A chunk that runs out of memory stops with ids = NULL; the error is
 * reported after the parallel region (no thread exits inside it). */
static IdBuffer *tokenize_lines(const Tokenizer *tok, const LineList *ll, int64_t *start,
                                int64_t *count) {
    int64_t num_chunks = (ll->num_lines + CHUNK_LINES - 1) / CHUNK_LINES;
    IdBuffer *chunk = xcalloc((size_t)num_chunks, sizeof *chunk);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < num_chunks; c++) {
        int64_t first = c * CHUNK_LINES, last = first + CHUNK_LINES;
        if (last > ll->num_lines)
            last = ll->num_lines;
        IdBuffer *b = &chunk[c];
        for (int64_t i = first; i < last; i++)
            b->cap += ll->lines[i].len / 3 + 4; /* about 4-5 bytes per WordPiece in English */
        b->ids = malloc(b->cap * sizeof(int));
        for (int64_t i = first; i < last && b->ids; i++) {
            const Line *line = &ll->lines[i];
            size_t n =
                tokenizer_encode(tok, line->text, line->len, b->ids + b->used, b->cap - b->used);
            if (n > b->cap - b->used) {
                b->cap = 2 * b->cap > b->used + n ? 2 * b->cap : b->used + n;
                int *grown = realloc(b->ids, b->cap * sizeof(int));
                if (!grown) {
                    free(b->ids);
                    b->ids = NULL;
                    break;
                }
                b->ids = grown;
                n = tokenizer_encode(tok, line->text, line->len, b->ids + b->used,
                                     b->cap - b->used);
            }
            start[i] = (int64_t)b->used;
            count[i] = (int64_t)n;
            b->used += n;
        }
    }
    for (int64_t c = 0; c < num_chunks; c++)
        RP_CHECK(chunk[c].ids, "out of memory tokenizing the corpus ([data] corpus): %zu token ids",
                 chunk[c].cap);
    return chunk;
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct {
    const DataConfig *data;
    const char *vocab_md5;
    int vocab_size;
    const char *sources;
} ShardMeta;


void shard_path(char *out, size_t size, const char *shard_dir, const char *split) {
    int n = snprintf(out, size, "%s/%s.h5", shard_dir, split);
    RP_CHECK(n > 0 && (size_t)n < size, "[data] shard_dir: path too long: %s", shard_dir);
}

/* Write the documents with in_split[doc] set, in corpus order, to shard_dir/<split>.h5 via a
 * temporary file and rename(2). */
static SplitCounts write_split(const ShardMeta *meta, const char *split, const LineList *ll,
                               const IdBuffer *chunk, const int64_t *start, const int64_t *count,
                               const unsigned char *in_split) {
    SplitCounts n = {0, 0, 0};
    int64_t prev_doc = -1;
    for (int64_t i = 0; i < ll->num_lines; i++)
        if (count[i] && in_split[ll->lines[i].doc]) {
            n.documents += ll->lines[i].doc != prev_doc;
            n.sentences++;
            n.tokens += count[i];
            prev_doc = ll->lines[i].doc;
        }
    int32_t *tokens = xmalloc((size_t)n.tokens * sizeof *tokens);
    int64_t *sent_off = xmalloc((size_t)(n.sentences + 1) * sizeof *sent_off);
    int64_t *doc_off = xmalloc((size_t)(n.documents + 1) * sizeof *doc_off);
    int64_t t = 0, s = 0, d = 0;
    prev_doc = -1;
    for (int64_t i = 0; i < ll->num_lines; i++) {
        if (!count[i] || !in_split[ll->lines[i].doc])
            continue;
        if (ll->lines[i].doc != prev_doc)
            doc_off[d++] = s;
        prev_doc = ll->lines[i].doc;
        sent_off[s++] = t;
        memcpy(tokens + t, chunk[i / CHUNK_LINES].ids + start[i],
               (size_t)count[i] * sizeof *tokens);
        t += count[i];
    }
    sent_off[s] = t;
    doc_off[d] = s;

    char final_path[CONFIG_PATH_MAX], tmp_path[CONFIG_PATH_MAX + 32];
    shard_path(final_path, sizeof final_path, meta->data->shard_dir, split);
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp.%ld", final_path, (long)getpid());
    remove_stale_temp_files(meta->data->shard_dir);
    hid_t f = h5_create(tmp_path);
    hsize_t dims[3] = {(hsize_t)n.tokens, (hsize_t)n.sentences + 1, (hsize_t)n.documents + 1};
    h5_write_ints(f, "tokens", tokens, 1, &dims[0]);
    h5_write_int64s(f, "sentence_offsets", sent_off, 1, &dims[1]);
    h5_write_int64s(f, "document_offsets", doc_off, 1, &dims[2]);
    char fraction[32];
    format_float(fraction, sizeof fraction, meta->data->eval_fraction);
    h5_attr_write_string(f, "format", SHARD_FORMAT);
    h5_attr_write_string(f, "split", split);
    h5_attr_write_int64(f, "vocab_size", meta->vocab_size);
    h5_attr_write_int64(f, "do_lower_case", meta->data->do_lower_case);
    h5_attr_write_string(f, "vocab_md5", meta->vocab_md5);
    h5_attr_write_string(f, "sources", meta->sources);
    h5_attr_write_int64(f, "seed", meta->data->seed);
    h5_attr_write_string(f, "eval_fraction", fraction);
    h5_close(f, tmp_path);
    RP_CHECK(rename(tmp_path, final_path) == 0, "%s: cannot rename to %s: %s", tmp_path, final_path,
             strerror(errno));
    free(tokens);
    free(sent_off);
    free(doc_off);
    return n;
}

/* ---- prepare --------------------------------------------------------------------------------- */

PrepareReport corpus_prepare(const DataConfig *data) {
    PrepareReport report = {0};
    double t0 = now_seconds();
    RP_CHECK(data->num_corpus > 0, "[data] corpus: expected at least one text file, got none");
    RP_CHECK(data->vocab[0], "[data] vocab: expected a vocabulary file, got none");
    char shards[2][CONFIG_PATH_MAX + 16];
    shard_path(shards[0], sizeof shards[0], data->shard_dir, "train");
    shard_path(shards[1], sizeof shards[1], data->shard_dir, "eval");
    for (int i = 0; i < data->num_corpus; i++) { /* fail fast, before any work */
        RP_CHECK(access(data->corpus[i], R_OK) == 0,
                 "%s: cannot open corpus file ([data] corpus): %s", data->corpus[i],
                 strerror(errno));
        for (int s = 0; s < 2; s++)
            require_distinct_files(data->corpus[i], "prepare: [data] corpus", shards[s], "shard ([data] shard_dir)");
    }
    size_t vocab_len;
    char *vocab_text = read_file(data->vocab, &vocab_len, "vocabulary ([data] vocab)");
    Tokenizer *tok = tokenizer_from_text(vocab_text, vocab_len, data->do_lower_case, data->vocab);
    char vocab_md5[33];
    md5_hex(vocab_text, vocab_len, vocab_md5);

    char **texts = xcalloc((size_t)data->num_corpus, sizeof *texts);
    size_t sources_len = 1;
    LineList ll = {0};
    for (int i = 0; i < data->num_corpus; i++) {
        size_t len;
        texts[i] = read_file(data->corpus[i], &len, "corpus file ([data] corpus)");
        split_lines(&ll, texts[i], len);
        sources_len += strlen(data->corpus[i]) + 1;
    }
    char *sources = xcalloc(sources_len, 1);
    for (int i = 0; i < data->num_corpus; i++)
        strcat(strcat(sources, data->corpus[i]), i + 1 < data->num_corpus ? "\n" : "");
    RP_CHECK(ll.num_lines > 0, "[data] corpus (%s%s): no sentences: every line is blank",
             data->corpus[0], data->num_corpus > 1 ? ", ..." : "");
    double t1 = now_seconds();

    int64_t *start = xmalloc((size_t)ll.num_lines * sizeof *start);
    int64_t *count = xmalloc((size_t)ll.num_lines * sizeof *count);
    IdBuffer *chunk = tokenize_lines(tok, &ll, start, count);
    double t2 = now_seconds();
    int64_t unknown = 0, total = 0;
    for (int64_t c = 0; c < (ll.num_lines + CHUNK_LINES - 1) / CHUNK_LINES; c++)
        for (size_t i = 0; i < chunk[c].used; i++)
            unknown += chunk[c].ids[i] == tokenizer_special(tok).unk;
    for (int64_t i = 0; i < ll.num_lines; i++)
        total += count[i];
    tokenizer_report_unknown(unknown, total, data->corpus[0], data->vocab);

    /* Documents that kept at least one sentence, then the held-out ones among them. */
    unsigned char *kept = xcalloc((size_t)ll.num_docs, 1);
    for (int64_t i = 0; i < ll.num_lines; i++) {
        kept[ll.lines[i].doc] |= count[i] > 0;
        report.dropped_sentences += count[i] == 0;
    }
    int64_t *docs = xmalloc((size_t)ll.num_docs * sizeof *docs), num_kept = 0;
    for (int64_t d = 0; d < ll.num_docs; d++)
        if (kept[d])
            docs[num_kept++] = d;
    RP_CHECK(
        num_kept > 0,
        "[data] corpus (%s%s): all %lld documents are empty: none of their %lld lines produced a "
        "token with vocabulary %s",
        data->corpus[0], data->num_corpus > 1 ? ", ..." : "", (long long)ll.num_docs,
        (long long)ll.num_lines, data->vocab);
    int64_t num_eval = llround((double)data->eval_fraction * (double)num_kept);
    if (num_eval < 1)
        num_eval = 1;
    RP_CHECK(
        num_eval < num_kept,
        "[data] eval_fraction = %g holds out %lld of the corpus's %lld documents, leaving none "
        "for training: add documents (separated by blank lines) or lower eval_fraction",
        (double)data->eval_fraction, (long long)num_eval, (long long)num_kept);
    Rng rng;
    rng_seed(&rng, hash64((uint64_t)data->seed ^ SPLIT_SALT));
    unsigned char *is_eval = xcalloc((size_t)ll.num_docs, 1);
    unsigned char *is_train = xcalloc((size_t)ll.num_docs, 1);
    for (int64_t i = 0; i < num_eval; i++) { /* partial Fisher-Yates: docs[0, num_eval) held out */
        int64_t j = i + (int64_t)rng_below(&rng, (uint64_t)(num_kept - i));
        int64_t tmp = docs[i];
        docs[i] = docs[j];
        docs[j] = tmp;
        is_eval[docs[i]] = 1;
    }
    for (int64_t d = 0; d < ll.num_docs; d++)
        is_train[d] = kept[d] && !is_eval[d];

    mkdir_p(data->shard_dir);
    ShardMeta meta = {data, vocab_md5, tokenizer_vocab_size(tok), sources};
    report.train = write_split(&meta, "train", &ll, chunk, start, count, is_train);
    report.eval = write_split(&meta, "eval", &ll, chunk, start, count, is_eval);
    double t3 = now_seconds();
    report.seconds_read = t1 - t0;
    report.seconds_tokenize = t2 - t1;
    report.seconds_write = t3 - t2;

    for (int64_t c = 0; c < (ll.num_lines + CHUNK_LINES - 1) / CHUNK_LINES; c++)
        free(chunk[c].ids);
    for (int i = 0; i < data->num_corpus; i++)
        free(texts[i]);
    free(chunk), free(start), free(count), free(kept), free(docs), free(is_eval), free(is_train);
    free(texts), free(sources), free(ll.lines), free(vocab_text);
    tokenizer_free(tok);
    return report;
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
    long *counts = xcalloc((size_t)shard->vocab_size, sizeof(long));
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
