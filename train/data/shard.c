/* The Shard (shard.h): loading the old single-file format whole, and reading a split in memory or
 * lazily from a shard set's files: a shard file's seal is verified at its first read (shard_file_ready:
 * the CRC through the descriptor kept open, then libhdf5 on the verified file for its attributes and
 * dataset offsets), once per process; after that tokens and offsets are read with pread(2) from the
 * file offsets of the contiguous datasets, and what is read is checked as it is read. */
#include "train/data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "train/data/md5.h"
#include "train/data/tokenizer.h"

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

/* Drop one Shard's hold on its set's files; the last closes them. */
static void shard_files_release(ShardFiles *set) {
    if (!set || --set->refs > 0)
        return;
    for (int i = 0; i < set->count; i++)
        close(set->file[i].fd);
    free(set);
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

/* ---- lazy reading of a shard set's files ------------------------------------------------------ */

enum { AT_TOKENS, AT_SENTENCES, AT_DOCUMENTS };
static const char *const split_names[2] = {"train", "eval"};

/* The file offset of dataset name (contiguous, elements of type `type`, n of them). */
static off_t dataset_at(hid_t f, const char *path, const char *name, hid_t type, int64_t n) {
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    RP_CHECK(ds >= 0, "%s: dataset '%s' missing", path, name);
    hid_t plist = H5Dget_create_plist(ds), t = H5Dget_type(ds), space = H5Dget_space(ds);
    hssize_t count = H5Sget_simple_extent_npoints(space);
    int contiguous = H5Pget_layout(plist) == H5D_CONTIGUOUS, same = H5Tequal(t, type) > 0;
    haddr_t at = H5Dget_offset(ds);
    H5Sclose(space), H5Tclose(t), H5Pclose(plist), H5Dclose(ds);
    RP_CHECK(contiguous && same, "%s: dataset '%s': expected a contiguous dataset of native %s",
             path, name, type == H5T_NATIVE_INT32 ? "int32" : "int64");
    RP_CHECK(count == n, "%s: dataset '%s': expected %lld elements (index.json), got %lld", path,
             name, (long long)n, (long long)count);
    RP_CHECK(n == 0 || at != HADDR_UNDEF, "%s: dataset '%s' has no storage", path, name);
    return n == 0 ? 0 : (off_t)at;
}

void shard_file_path(char *out, size_t size, const ShardFiles *set, const ShardFile *f) {
    snprintf(out, size, "%s/%s", set->dir, f->name);
}

/* Make f readable: verify its whole seal through the descriptor reads will use, then (libhdf5
 * sees only a verified file) check its format and prepare_id and locate both splits' datasets,
 * their sizes checked against the index. Once per file and process: the descriptor stays open,
 * so later reads are of these same verified bytes. */
void shard_file_ready(const ShardFiles *set, ShardFile *f) {
    char path[CONFIG_PATH_MAX + 80], why[256];
    shard_file_path(path, sizeof path, set, f);
    RP_CHECK(h5_check_seal_fd(f->fd, 1, why, sizeof why) == H5_SEAL_OK,
             "%s: %s (a shard of %s, verified at its first read): run `realpos prepare CONFIG.ini` "
             "again, which prepares this shard's source anew",
             path, why, set->index);
    struct stat held, named;
    RP_CHECK(fstat(f->fd, &held) == 0 && stat(path, &named) == 0 && held.st_dev == named.st_dev &&
                 held.st_ino == named.st_ino,
             "%s: replaced since the run opened %s (a prepare writing into the set?): restart the run",
             path, set->index);
    hid_t h = h5_open_verified(path);
    char *fmt = h5_attr_read_string(h, "format", path), *id = h5_attr_read_string(h, "prepare_id", path);
    RP_CHECK(!strcmp(fmt, SHARD_SET_FORMAT), "%s: attribute 'format': expected '%s', got '%s'", path,
             SHARD_SET_FORMAT, fmt);
    RP_CHECK(!strcmp(id, set->prepare_id),
             "%s: made by another prepare (prepare_id %s) than %s (prepare_id %s): run realpos "
             "prepare CONFIG.ini again",
             path, id, set->index, set->prepare_id);
    free(fmt), free(id);
    /* a shard rewritten after the index was (a re-prepare of a changed source, interrupted before
     * its new index): the index's counts and offsets are not this file's */
    char mtime[24];
    snprintf(mtime, sizeof mtime, "%lld", (long long)h5_attr_read_int64(h, "source_mtime_ns", path));
    int64_t size = h5_attr_read_int64(h, "source_size", path);
    char *digest = h5_attr_exists(h, "content_digest") ? h5_attr_read_string(h, "content_digest", path) : NULL;
    RP_CHECK(size == f->source_size && !strcmp(mtime, f->source_mtime) &&
                 (!f->digest || !digest || strtoull(digest, NULL, 16) == f->digest),
             "%s: not the shard %s lists (made from a version of its source of %lld bytes, mtime_ns %s, "
             "contents %s; the index lists %lld bytes, mtime_ns %s, contents %016llx): a prepare rewrote "
             "it after the index was written and was interrupted; re-run `realpos prepare CONFIG.ini`",
             path, set->index, (long long)size, mtime, digest ? digest : "not recorded",
             (long long)f->source_size, f->source_mtime, (unsigned long long)f->digest);
    free(digest);
    for (int k = 0; k < 2; k++) {
        const SplitCounts *n = &f->count[k];
        if (n->documents == 0)
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s/tokens", split_names[k]);
        f->at[k][AT_TOKENS] = dataset_at(h, path, name, H5T_NATIVE_INT32, n->tokens);
        snprintf(name, sizeof name, "%s/sentence_offsets", split_names[k]);
        f->at[k][AT_SENTENCES] = dataset_at(h, path, name, H5T_NATIVE_INT64, n->sentences + 1);
        snprintf(name, sizeof name, "%s/document_offsets", split_names[k]);
        f->at[k][AT_DOCUMENTS] = dataset_at(h, path, name, H5T_NATIVE_INT64, n->documents + 1);
    }
    h5_close(h, path);
    f->ready = 1;
}

void shard_verify(const Shard *s) {
    if (!s->files)
        return;
    double t0 = now_seconds();
    for (int i = 0; i < s->files->count; i++)
        if (!s->files->file[i].ready)
            shard_file_ready(s->files, &s->files->file[i]);
    rp_log("data: %s: %d shards verified in %.2f s", s->files->index, s->files->count,
           now_seconds() - t0);
}

/* bytes at offset `at` of dataset `which` of part p's split: the file made ready first. */
static void read_at(const Shard *s, const ShardPart *p, void *out, size_t bytes, int which, off_t at) {
    if (!p->file->ready)
        shard_file_ready(s->files, p->file);
    at += p->file->at[p->split][which];
    size_t done = 0;
    while (done < bytes) {
        ssize_t got = pread(p->file->fd, (char *)out + done, bytes - done, at + (off_t)done);
        if (got < 0 && errno == EINTR)
            continue;
        RP_CHECK(got > 0, "%s: shard %s: %s at byte %lld", s->path, p->file->name,
                 got < 0 ? strerror(errno) : "file ends early", (long long)(at + (off_t)done));
        done += (size_t)got;
    }
}

/* The part holding global element index i, by the base field at offset `base` of ShardPart. */
static const ShardPart *find_part(const Shard *s, int64_t i, size_t base) {
    int lo = 0, hi = s->num_parts - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (*(const int64_t *)((const char *)&s->parts[mid] + base) <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &s->parts[lo];
}

void shard_document(const Shard *s, int64_t doc, int64_t *first, int64_t *count) {
    if (!s->parts) {
        *first = s->document_offsets[doc];
        *count = s->document_offsets[doc + 1] - *first;
        return;
    }
    const ShardPart *p = find_part(s, doc, offsetof(ShardPart, doc_base));
    int64_t local = doc - p->doc_base, off[2];
    read_at(s, p, off, sizeof off, AT_DOCUMENTS, (off_t)local * 8);
    RP_CHECK(off[0] >= 0 && off[1] > off[0] && off[1] <= p->num_sentences,
             "%s: shard %s: document_offsets[%lld] = %lld, %lld: expected increasing offsets in [0, %lld]",
             s->path, p->file->name, (long long)local, (long long)off[0], (long long)off[1],
             (long long)p->num_sentences);
    *first = p->sent_base + off[0];
    *count = off[1] - off[0];
}

void shard_window_reset(ShardWindow *w) { w->first = w->count = 0; }
void shard_sentence(const Shard *s, ShardWindow *w, int64_t sent, int64_t *from, int64_t *to) {
    if (!s->parts) {
        *from = s->sentence_offsets[sent];
        *to = s->sentence_offsets[sent + 1];
        return;
    }
    if (sent < w->first || sent >= w->first + w->count) {
        const ShardPart *p = find_part(s, sent, offsetof(ShardPart, sent_base));
        int64_t local = sent - p->sent_base, n = p->num_sentences - local;
        n = n < SHARD_WINDOW ? n : SHARD_WINDOW;
        read_at(s, p, w->offsets, (size_t)(n + 1) * 8, AT_SENTENCES, (off_t)local * 8);
        for (int64_t i = 0; i <= n; i++) {
            RP_CHECK((i == 0 ? w->offsets[0] >= 0 : w->offsets[i] > w->offsets[i - 1]) &&
                         w->offsets[i] <= p->num_tokens,
                     "%s: shard %s: sentence_offsets[%lld] = %lld: expected increasing offsets in "
                     "[0, %lld]",
                     s->path, p->file->name, (long long)(local + i), (long long)w->offsets[i],
                     (long long)p->num_tokens);
        }
        for (int64_t i = 0; i <= n; i++)
            w->offsets[i] += p->tok_base;
        w->first = sent;
        w->count = n;
    }
    *from = w->offsets[sent - w->first];
    *to = w->offsets[sent - w->first + 1];
}

void shard_read_tokens(const Shard *s, int64_t from, int64_t n, int32_t *out) {
    if (!s->parts) {
        memcpy(out, s->tokens + from, (size_t)n * sizeof *out);
        return;
    }
    const ShardPart *p = find_part(s, from, offsetof(ShardPart, tok_base));
    read_at(s, p, out, (size_t)n * sizeof *out, AT_TOKENS, (off_t)(from - p->tok_base) * 4);
    for (int64_t i = 0; i < n; i++)
        RP_CHECK(out[i] >= 0 && out[i] < s->vocab_size,
                 "%s: shard %s: dataset 'tokens': expected ids in [0, %d), got %d at index %lld",
                 s->path, p->file->name, s->vocab_size, out[i], (long long)(from - p->tok_base + i));
}
