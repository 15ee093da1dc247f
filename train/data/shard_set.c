/* Opening a shard set for training and reading it lazily (shard_set.h).
 *
 * Opening reads index.json and, per shard file, opens a descriptor and reads its 512-byte
 * checksum header (length and format; the descriptor is shared by the train and eval splits).
 * A shard's whole CRC-32 seal is verified at the first read of it (file_ready: the CRC through
 * that descriptor, then libhdf5 on the verified file for its attributes and dataset offsets),
 * once per process. After that, tokens and offsets are read with pread(2) from the file offsets
 * of the contiguous datasets: a document's two offsets, a window of SHARD_WINDOW sentence
 * offsets, a sentence's tokens straight into the row. Resident memory is the parts and files
 * tables (a few words per shard), the token counts and the readers' windows, whatever the corpus
 * size; what is read is checked (offsets increasing and in range, ids below vocab_size) as it is
 * read. (The writer's record of a prepare in progress, its N, is in shard_parts.c.) */
#include "train/data/shard_set.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/crc32.h"
#include "core/io/h5io.h"
#include "train/data/shard_index.h"

/* One shard file of a set, shared by the set's train and eval Shards. */
typedef struct {
    int fd;               /* opened at start-up and kept: every read is of this one file */
    int ready;            /* seal verified, datasets located: at the first read of either split */
    char name[64];        /* in shard_dir */
    SplitCounts count[2]; /* train, eval: from index.json */
    /* what index.json says the shard holds: its source's version and its contents' digest (0:
     * not recorded), checked at the first read against the shard's own attributes */
    int64_t source_size;
    char source_mtime[24];
    uint64_t digest;
    off_t at[2][3];       /* file offsets of {train, eval} x {tokens, sentence_offsets, document_offsets} */
} ShardFile;

struct ShardFiles { /* released by the last of the set's two Shards */
    int refs, count;
    char dir[CONFIG_PATH_MAX], index[CONFIG_PATH_MAX + 32], prepare_id[17];
    ShardFile file[];
};

struct ShardPart {
    ShardFile *file;
    int split;                                 /* 0 train, 1 eval */
    int64_t doc_base, sent_base, tok_base;     /* global index of the part's first element */
    int64_t num_documents, num_sentences, num_tokens;
};

enum { AT_TOKENS, AT_SENTENCES, AT_DOCUMENTS };
static const char *const split_names[2] = {"train", "eval"};

/* ---- opening --------------------------------------------------------------------------------- */

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

static void file_path(char *out, size_t size, const ShardFiles *set, const ShardFile *f) {
    snprintf(out, size, "%s/%s", set->dir, f->name);
}

/* Make f readable: verify its whole seal through the descriptor reads will use, then (libhdf5
 * sees only a verified file) check its format and prepare_id and locate both splits' datasets,
 * their sizes checked against the index. Once per file and process: the descriptor stays open,
 * so later reads are of these same verified bytes. */
static void file_ready(const ShardFiles *set, ShardFile *f) {
    char path[CONFIG_PATH_MAX + 80], why[256];
    file_path(path, sizeof path, set, f);
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

/* Room for `need` more open files (the soft limit raised toward the hard one); fatal, naming the
 * limit, when the hard limit is too low. A larger data.shard_tokens helps only when some source
 * has several shards: each source has at least one. */
static void reserve_files(int need, int num_sources, const char *what) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    if (rl.rlim_cur < (rlim_t)need + 64) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)need + 64
                          ? (rlim_t)need + 64
                          : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        char fewer[200] = "";
        if (need > num_sources)
            snprintf(fewer, sizeof fewer, "; or make fewer, larger shards (a larger data.shard_tokens; the %d "
                     "corpus files need at least %d)", num_sources, num_sources);
        RP_CHECK(rl.rlim_cur >= (rlim_t)need + 16,
                 "%s: its %d shard files stay open while the set is read, with about 16 more, but the open-file "
                 "limit is %llu (hard limit; ulimit -n, ulimit -Hn): raise it, e.g. `ulimit -n %d` in the shell that "
                 "starts realpos (above the hard limit: root, or /etc/security/limits.conf)%s",
                 what, need, (unsigned long long)rl.rlim_max, need + 64, fewer);
    }
}

static Shard *new_lazy(const char *path, ShardFiles *set, int vocab_size, int do_lower_case,
                       const char *md5, const char *split) {
    Shard *s = xcalloc(1, sizeof *s);
    int n = snprintf(s->path, sizeof s->path, "%.*s (%s)", (int)sizeof s->path - 16, path, split);
    RP_CHECK(n > 0 && (size_t)n < sizeof s->path, "%s: path too long", path);
    s->parts = xcalloc((size_t)set->count, sizeof *s->parts);
    s->files = set;
    set->refs++;
    s->vocab_size = vocab_size;
    s->do_lower_case = do_lower_case;
    memcpy(s->vocab_md5, md5, 33);
    s->sources = xstrdup(path);
    return s;
}

void shard_files_release(ShardFiles *set) {
    if (!set || --set->refs > 0)
        return;
    for (int i = 0; i < set->count; i++)
        close(set->file[i].fd);
    free(set);
}

static void add_part(Shard *s, ShardFile *f, int split) {
    const SplitCounts *n = &f->count[split];
    if (n->documents == 0)
        return;
    ShardPart *p = &s->parts[s->num_parts++];
    *p = (ShardPart){f, split, s->num_documents, s->num_sentences, s->num_tokens,
                     n->documents, n->sentences, n->tokens};
    s->num_documents += n->documents;
    s->num_sentences += n->sentences;
    s->num_tokens += n->tokens;
}

/* Fatal unless f's counts fit in its file of `bytes` bytes: 4 per token, 8 per offset. */
static void check_counts_fit(const ShardFile *f, const char *path, const char *index, off_t bytes) {
    double need = 0;
    for (int k = 0; k < 2; k++)
        need += 4.0 * (double)f->count[k].tokens + 8.0 * (double)(f->count[k].sentences + f->count[k].documents + 2);
    RP_CHECK(need <= (double)bytes,
             "%s: lists %s with %lld + %lld tokens, %lld + %lld sentences, %lld + %lld documents (at least "
             "%.0f bytes), but the file holds %lld bytes: the index is damaged or not this set's; "
             "`realpos prepare CONFIG.ini` writes it again",
             index, path, (long long)f->count[0].tokens, (long long)f->count[1].tokens,
             (long long)f->count[0].sentences, (long long)f->count[1].sentences, (long long)f->count[0].documents,
             (long long)f->count[1].documents, need, (long long)bytes);
}

/* The set's shard files from the index, each opened and its seal's header and length checked
 * (one 512-byte read: a missing, truncated or foreign file fails here; corruption inside it is
 * found by file_ready at its first read). */
static ShardFiles *open_files(const DataConfig *d, const char *index_path, const cJSON *root,
                              const char *prepare_id) {
    int num_shards = 0;
    const cJSON *src, *sh;
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(root, "sources"))
        num_shards += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(src, "shards"));
    RP_CHECK(num_shards > 0, "%s: lists no shard", index_path);
    reserve_files(num_shards, cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "sources")), index_path);
    ShardFiles *set = xcalloc(1, sizeof *set + (size_t)num_shards * sizeof set->file[0]);
    snprintf(set->dir, sizeof set->dir, "%s", d->shard_dir);
    snprintf(set->index, sizeof set->index, "%s", index_path);
    snprintf(set->prepare_id, sizeof set->prepare_id, "%s", prepare_id);
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(root, "sources")) {
        int64_t source_size = shard_index_int(src, "size", index_path, INT64_MAX / 2);
        const char *source_mtime = shard_index_string(src, "mtime_ns", index_path);
        cJSON_ArrayForEach(sh, cJSON_GetObjectItemCaseSensitive(src, "shards")) {
            ShardFile *f = &set->file[set->count];
            const char *file = shard_index_string(sh, "file", index_path);
            const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sh, "digest"));
            f->source_size = source_size;
            snprintf(f->source_mtime, sizeof f->source_mtime, "%s", source_mtime);
            f->digest = digest ? strtoull(digest, NULL, 16) : 0;
            RP_CHECK(strlen(file) < sizeof f->name && !strchr(file, '/'), "%s: bad shard name '%s'",
                     index_path, file);
            snprintf(f->name, sizeof f->name, "%s", file);
            f->count[0] = shard_index_counts(sh, "train", index_path);
            f->count[1] = shard_index_counts(sh, "eval", index_path);
            char path[CONFIG_PATH_MAX + 80], why[256];
            file_path(path, sizeof path, set, f);
            require_regular_file(path, "shard");
            f->fd = open(path, O_RDONLY);
            RP_CHECK(f->fd >= 0, "%s: cannot open: %s%s", path, strerror(errno),
                     errno == EMFILE ? " (the open-file limit, ulimit -n, counts every shard of the set: raise it)" : "");
            set->count++;
            H5SealStatus seal = h5_check_seal_fd(f->fd, 0, why, sizeof why);
            RP_CHECK(seal == H5_SEAL_OK, "%s: %s (a shard of %s): run `realpos prepare CONFIG.ini` again",
                     path, why, index_path);
            struct stat st;
            RP_CHECK(fstat(f->fd, &st) == 0, "%s: cannot stat: %s", path, strerror(errno));
            check_counts_fit(f, path, index_path, st.st_size);
        }
    }
    return set;
}

/* Sum of the shards' /train/token_counts (the unigram baseline): from the index, or, for an index
 * written before it held them, read from every shard (each verified: the old start-up cost). */
static int token_counts(const cJSON *root, const char *index_path, ShardFiles *set, int64_t *out,
                        int vocab_size) {
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(root, "train_token_counts"), *c;
    if (counts) {
        RP_CHECK(cJSON_IsArray(counts) && cJSON_GetArraySize(counts) == vocab_size,
                 "%s: member 'train_token_counts': expected an array of vocab_size = %d numbers",
                 index_path, vocab_size);
        int v = 0;
        cJSON_ArrayForEach(c, counts) {
            RP_CHECK(cJSON_IsNumber(c) && c->valuedouble >= 0,
                     "%s: member 'train_token_counts': expected counts, got a %s at %d", index_path,
                     cJSON_IsNumber(c) ? "negative number" : "non-number", v);
            out[v++] = (int64_t)c->valuedouble;
        }
        return 1;
    }
    int64_t *one = xmalloc((size_t)vocab_size * sizeof *one);
    for (int i = 0; i < set->count; i++) {
        char path[CONFIG_PATH_MAX + 80];
        file_path(path, sizeof path, set, &set->file[i]);
        file_ready(set, &set->file[i]);
        hid_t h = h5_open_verified(path);
        hsize_t n = (hsize_t)vocab_size;
        h5_read_int64s(h, path, "train/token_counts", one, 1, &n);
        h5_close(h, path);
        for (int v = 0; v < vocab_size; v++)
            out[v] += one[v];
    }
    free(one);
    return 0;
}

static void open_set(const DataConfig *d, const char *index_path, const char *vocab_text,
                     size_t vocab_len, const char *vocab_origin, Shard **train, Shard **eval) {
    char md5[33], vocab_md5[33];
    md5_hex(vocab_text, vocab_len, vocab_md5);
    cJSON *root = shard_index_load(d, index_path, vocab_md5);
    snprintf(md5, sizeof md5, "%s", shard_index_string(root, "vocab_md5", index_path));
    int vocab_size = (int)shard_index_int(root, "vocab_size", index_path, SHARD_INDEX_MAX_VOCAB);
    int lower = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "do_lower_case"));
    double t0 = now_seconds();
    ShardFiles *set = open_files(d, index_path, root, shard_index_string(root, "prepare_id", index_path));
    *train = new_lazy(index_path, set, vocab_size, lower, md5, "train");
    *eval = new_lazy(index_path, set, vocab_size, lower, md5, "eval");
    shard_check_vocab(*train, vocab_text, vocab_len, d->do_lower_case, vocab_origin);
    for (int i = 0; i < set->count; i++) {
        add_part(*train, &set->file[i], 0);
        add_part(*eval, &set->file[i], 1);
    }
    SplitCounts want_train = shard_index_counts(root, "train", index_path),
                want_eval = shard_index_counts(root, "eval", index_path);
    RP_CHECK((*train)->num_tokens == want_train.tokens && (*eval)->num_tokens == want_eval.tokens &&
                 (*train)->num_documents == want_train.documents &&
                 (*eval)->num_documents == want_eval.documents,
             "%s: the shards' counts do not add up to the index's totals", index_path);
    (*train)->token_counts = xcalloc((size_t)vocab_size, sizeof *(*train)->token_counts);
    int lazy = token_counts(root, index_path, set, (*train)->token_counts, vocab_size);
    rp_log("data: %s: %d shards, %lld train / %lld eval documents, %lld / %lld tokens (opened in "
           "%.2f s; %s)",
           index_path, set->count, (long long)want_train.documents, (long long)want_eval.documents,
           (long long)want_train.tokens, (long long)want_eval.tokens, now_seconds() - t0,
           lazy ? "each shard's checksum is verified at its first read"
                : "every checksum verified now: this index predates 'train_token_counts', `realpos "
                  "prepare CONFIG.ini` rewrites it and keeps the shards");
    cJSON_Delete(root);
}

void shard_set_verify(const Shard *s) {
    if (!s->files)
        return;
    double t0 = now_seconds();
    for (int i = 0; i < s->files->count; i++)
        if (!s->files->file[i].ready)
            file_ready(s->files, &s->files->file[i]);
    rp_log("data: %s: %d shards verified in %.2f s", s->files->index, s->files->count,
           now_seconds() - t0);
}

void shard_set_open(const DataConfig *d, const char *vocab_text, size_t vocab_len,
                    const char *vocab_origin, Shard **train, Shard **eval) {
    char index[CONFIG_PATH_MAX + 32], old[CONFIG_PATH_MAX + 16];
    snprintf(index, sizeof index, "%s/%s", d->shard_dir, SHARD_SET_INDEX);
    if (access(index, R_OK) == 0) {
        open_set(d, index, vocab_text, vocab_len, vocab_origin, train, eval);
        return;
    }
    shard_path(old, sizeof old, d->shard_dir, "train");
    RP_CHECK(access(old, R_OK) == 0,
             "%s: no shard set (no %s); run `realpos prepare CONFIG.ini` first (or again, if it "
             "stopped or ran with --part)",
             d->shard_dir, SHARD_SET_INDEX);
    rp_log("data: %s: old single-file shards, loaded whole; `realpos prepare CONFIG.ini` makes a "
           "lazily read shard set", old);
    *train = shard_load(old);
    shard_check_vocab(*train, vocab_text, vocab_len, d->do_lower_case, vocab_origin);
    shard_path(old, sizeof old, d->shard_dir, "eval");
    *eval = shard_load(old);
    shard_check_vocab(*eval, vocab_text, vocab_len, d->do_lower_case, vocab_origin);
}

/* ---- reading --------------------------------------------------------------------------------- */

/* bytes at offset `at` of dataset `which` of part p's split: the file made ready first. */
static void read_at(const Shard *s, const ShardPart *p, void *out, size_t bytes, int which, off_t at) {
    if (!p->file->ready)
        file_ready(s->files, p->file);
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
