/* Opening a shard set for training (shard_set.h): index.json read and checked (shard_index.h),
 * then per shard file a descriptor opened and its 512-byte checksum header read (length and
 * format; the descriptor is shared by the train and eval splits), and the two lazy Shards of the
 * set built over them; reading them is the Shard's (shard.c). Resident memory is the parts and
 * files tables (a few words per shard), the token counts and the readers' windows, whatever the
 * corpus size. */
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
#include "core/io/h5io.h"
#include "core/io/paths.h"
#include "train/data/md5.h"
#include "train/data/shard.h"
#include "train/data/shard_index.h"

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
 * found by shard_file_ready at its first read). */
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
            shard_file_path(path, sizeof path, set, f);
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
        shard_file_path(path, sizeof path, set, &set->file[i]);
        shard_file_ready(set, &set->file[i]);
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
