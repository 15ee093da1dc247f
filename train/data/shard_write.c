/* Writing shard files, source manifests and the index of a shard set (shard_write.h). */
#include "train/data/shard_write.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "core/rng.h"
#include "train/data/shard_settings.h"
#include "train/data/shard_temp.h"

static const char *const split_names[2] = {"train", "eval"};

static void digest_text(char out[17], uint64_t digest) {
    snprintf(out, 17, "%016llx", (unsigned long long)digest);
}

/* ---- shard files ----------------------------------------------------------------------------- */

static void shard_file(char *out, size_t size, const char *dir, const char *stem, int k) {
    int n = snprintf(out, size, "%s/%s-%d.h5", dir, stem, k);
    RP_CHECK(n > 0 && (size_t)n < size, "[data] shard_dir: path too long: %s", dir);
}

static void attr_counts(hid_t f, const char *split, const SplitCounts *c) {
    char name[64];
    snprintf(name, sizeof name, "%s_documents", split);
    h5_attr_write_int64(f, name, c->documents);
    snprintf(name, sizeof name, "%s_sentences", split);
    h5_attr_write_int64(f, name, c->sentences);
    snprintf(name, sizeof name, "%s_tokens", split);
    h5_attr_write_int64(f, name, c->tokens);
}

/* The tests' signals at chosen points, whatever the host's speed (tests/train/data/test_corpus.sh,
 * test_shard_identity.sh): whether environment variable `name` names shard k of a source
 * (REALPOS_TEST_KILL_AFTER_SHARD=K: SIGKILL right after shard K is in place, as a kill at that
 * moment would; REALPOS_TEST_TERM_IN_SHARD=K: SIGTERM while shard K's temporary is being written;
 * REALPOS_TEST_STOP_IN_SHARD=K: SIGSTOP there, the shard directory's lock held, test_run.sh). */
static int test_signal_at(const char *name, int k) {
    const char *at = getenv(name);
    if (!at || !*at)
        return 0;
    char *end;
    long shard = strtol(at, &end, 10);
    RP_CHECK(*end == '\0' && shard >= 0 && shard <= INT_MAX,
             "environment variable %s: expected a shard number >= 0, got '%s'", name, at);
    return shard == k;
}

ShardCounts shard_write(const SetSettings *s, const CorpusFile *src, const char *stem, int k,
                        const ShardBuffer *b, int64_t input_end, int64_t line_end) {
    const DataConfig *d = s->data;
    char path[CONFIG_PATH_MAX + 64], tmp[CONFIG_PATH_MAX + 256];
    shard_file(path, sizeof path, d->shard_dir, stem, k);
    shard_temp_begin(tmp, sizeof tmp, path);
    hid_t f = h5_create(tmp);
    if (test_signal_at("REALPOS_TEST_TERM_IN_SHARD", k))
        raise(SIGTERM);
    if (test_signal_at("REALPOS_TEST_STOP_IN_SHARD", k))
        raise(SIGSTOP);
    ShardCounts c = {{0, 0, 0}, {0, 0, 0}, b->bad_records, b->dropped_sentences, shard_buffer_digest(b)};
    char digest[17];
    digest_text(digest, c.digest);
    for (int i = 0; i < 2; i++) {
        const SplitBuffer *sb = &b->split[i];
        char name[64];
        int32_t none = 0;
        hsize_t dims[3] = {(hsize_t)sb->num_tokens, (hsize_t)sb->num_sentences + 1,
                           (hsize_t)sb->num_documents + 1};
        snprintf(name, sizeof name, "%s/tokens", split_names[i]);
        h5_write_ints(f, name, sb->num_tokens ? sb->tokens : &none, 1, &dims[0]);
        snprintf(name, sizeof name, "%s/sentence_offsets", split_names[i]);
        h5_write_int64s(f, name, sb->sentence_offsets, 1, &dims[1]);
        snprintf(name, sizeof name, "%s/document_offsets", split_names[i]);
        h5_write_int64s(f, name, sb->document_offsets, 1, &dims[2]);
        SplitCounts *sc = i ? &c.eval : &c.train;
        *sc = (SplitCounts){sb->num_documents, sb->num_sentences, sb->num_tokens};
        attr_counts(f, split_names[i], sc);
    }
    hsize_t vocab = (hsize_t)s->vocab_size;
    h5_write_int64s(f, "train/token_counts", b->token_counts, 1, &vocab);
    char fraction[32];
    format_float(fraction, sizeof fraction, d->eval_fraction);
    h5_attr_write_string(f, "format", SHARD_SET_FORMAT);
    h5_attr_write_string(f, "prepare_id", s->prepare_id);
    h5_attr_write_int64(f, "vocab_size", s->vocab_size);
    h5_attr_write_int64(f, "do_lower_case", d->do_lower_case);
    h5_attr_write_string(f, "vocab_md5", s->vocab_md5);
    h5_attr_write_int64(f, "seed", d->seed);
    h5_attr_write_string(f, "eval_fraction", fraction);
    h5_attr_write_string(f, "source", src->path);
    h5_attr_write_int64(f, "source_size", src->size);
    h5_attr_write_int64(f, "source_mtime_ns", src->mtime_ns);
    h5_attr_write_int64(f, "shard", k);
    h5_attr_write_int64(f, "input_end", input_end);
    h5_attr_write_int64(f, "line_end", line_end);
    h5_attr_write_int64(f, "bad_records", b->bad_records);
    h5_attr_write_int64(f, "dropped_sentences", b->dropped_sentences);
    h5_attr_write_string(f, "content_digest", digest);
    h5_close(f, tmp);
    int renamed = rename(tmp, path) == 0, err = errno;
    if (!renamed)
        unlink(tmp);
    shard_temp_end();
    RP_CHECK(renamed, "%s: cannot rename to %s: %s (removed the temporary file)", tmp, path, strerror(err));
    if (test_signal_at("REALPOS_TEST_KILL_AFTER_SHARD", k))
        raise(SIGKILL);
    return c;
}

static int64_t attr_or(hid_t f, const char *name, const char *path) {
    return h5_attr_read_int64(f, name, path);
}

int shard_write_kept(const SetSettings *s, const CorpusFile *src, const char *stem, int k,
               ShardCounts *c, int64_t *input_end, int64_t *line_end) {
    char path[CONFIG_PATH_MAX + 64], why[256];
    shard_file(path, sizeof path, s->data->shard_dir, stem, k);
    if (access(path, F_OK) != 0 || h5_check_seal(path, why, sizeof why) != H5_SEAL_OK)
        return 0;
    hid_t f = h5_open(path, 0);
    int ok = h5_attr_exists(f, "prepare_id") && h5_attr_exists(f, "source");
    if (ok) {
        char *id = h5_attr_read_string(f, "prepare_id", path);
        char *source = h5_attr_read_string(f, "source", path);
        ok = !strcmp(id, s->prepare_id) && !strcmp(source, src->path) &&
             attr_or(f, "source_size", path) == src->size &&
             attr_or(f, "source_mtime_ns", path) == src->mtime_ns && attr_or(f, "shard", path) == k;
        free(id);
        free(source);
    }
    if (ok) {
        c->train = (SplitCounts){attr_or(f, "train_documents", path),
                                 attr_or(f, "train_sentences", path), attr_or(f, "train_tokens", path)};
        c->eval = (SplitCounts){attr_or(f, "eval_documents", path), attr_or(f, "eval_sentences", path),
                                attr_or(f, "eval_tokens", path)};
        c->bad_records = attr_or(f, "bad_records", path);
        c->dropped_sentences = attr_or(f, "dropped_sentences", path);
        *input_end = attr_or(f, "input_end", path);
        *line_end = attr_or(f, "line_end", path);
        c->digest = 0;
        if (h5_attr_exists(f, "content_digest")) {
            char *digest = h5_attr_read_string(f, "content_digest", path);
            c->digest = strtoull(digest, NULL, 16);
            free(digest);
        }
    }
    h5_close(f, path);
    return ok;
}

/* ---- manifests and the index ----------------------------------------------------------------- */

static cJSON *counts_json(const SplitCounts *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "documents", (double)c->documents);
    cJSON_AddNumberToObject(o, "sentences", (double)c->sentences);
    cJSON_AddNumberToObject(o, "tokens", (double)c->tokens);
    return o;
}

static SplitCounts counts_from(const cJSON *o) {
    SplitCounts c = {0, 0, 0};
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "documents")) && cJSON_IsNumber(v))
        c.documents = (int64_t)v->valuedouble;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "sentences")) && cJSON_IsNumber(v))
        c.sentences = (int64_t)v->valuedouble;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "tokens")) && cJSON_IsNumber(v))
        c.tokens = (int64_t)v->valuedouble;
    return c;
}

static void add_counts(SplitCounts *a, const SplitCounts *b) {
    a->documents += b->documents;
    a->sentences += b->sentences;
    a->tokens += b->tokens;
}

static void manifest_path(char *out, size_t size, const char *dir, const char *stem) {
    int n = snprintf(out, size, "%s/%s.json", dir, stem);
    RP_CHECK(n > 0 && (size_t)n < size, "[data] shard_dir: path too long: %s", dir);
}

static void write_json(const char *path, cJSON *root) {
    char *text = cJSON_Print(root);
    RP_CHECK(text, "%s: out of memory writing JSON", path);
    write_file(path, text, strlen(text));
    free(text);
}

void shard_write_manifest(const SetSettings *s, const CorpusFile *src, const char *stem,
                    Compression compression, const char *format, const ShardCounts *shards,
                    int num_shards) {
    cJSON *m = cJSON_CreateObject();
    char mtime[32];
    snprintf(mtime, sizeof mtime, "%lld", (long long)src->mtime_ns);
    cJSON_AddStringToObject(m, "prepare_id", s->prepare_id);
    cJSON_AddStringToObject(m, "path", src->path);
    cJSON_AddNumberToObject(m, "size", (double)src->size);
    cJSON_AddStringToObject(m, "mtime_ns", mtime);
    cJSON_AddStringToObject(m, "compression", corpus_reader_compression_name(compression));
    cJSON_AddStringToObject(m, "format", format);
    ShardCounts total = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
    cJSON *list = cJSON_AddArrayToObject(m, "shards");
    for (int k = 0; k < num_shards; k++) {
        char file[64];
        snprintf(file, sizeof file, "%s-%d.h5", stem, k);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", file);
        cJSON_AddItemToObject(o, "train", counts_json(&shards[k].train));
        cJSON_AddItemToObject(o, "eval", counts_json(&shards[k].eval));
        if (shards[k].digest) {
            char digest[17];
            digest_text(digest, shards[k].digest);
            cJSON_AddStringToObject(o, "digest", digest);
        }
        cJSON_AddItemToArray(list, o);
        add_counts(&total.train, &shards[k].train);
        add_counts(&total.eval, &shards[k].eval);
        total.bad_records += shards[k].bad_records;
        total.dropped_sentences += shards[k].dropped_sentences;
    }
    cJSON_AddItemToObject(m, "train", counts_json(&total.train));
    cJSON_AddItemToObject(m, "eval", counts_json(&total.eval));
    cJSON_AddNumberToObject(m, "bad_records", (double)total.bad_records);
    cJSON_AddNumberToObject(m, "dropped_sentences", (double)total.dropped_sentences);
    char path[CONFIG_PATH_MAX + 64];
    manifest_path(path, sizeof path, s->data->shard_dir, stem);
    write_json(path, m);
    cJSON_Delete(m);
    /* Shards numbered past the last (left by an older version of the source) are not the set's. */
    for (int k = num_shards;; k++) {
        char old[CONFIG_PATH_MAX + 64];
        shard_file(old, sizeof old, s->data->shard_dir, stem, k);
        if (unlink(old) != 0)
            break;
    }
}

/* The source's manifest as parsed JSON if it matches the settings and the source, else NULL. */
static cJSON *manifest_read(const SetSettings *s, const CorpusFile *src, const char *stem) {
    char path[CONFIG_PATH_MAX + 64], mtime[32];
    manifest_path(path, sizeof path, s->data->shard_dir, stem);
    if (access(path, R_OK) != 0)
        return NULL;
    size_t len;
    char *text = read_file(path, &len, "source manifest");
    cJSON *m = cJSON_ParseWithLength(text, len);
    free(text);
    snprintf(mtime, sizeof mtime, "%lld", (long long)src->mtime_ns);
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "prepare_id"));
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "path"));
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "mtime_ns"));
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(m, "size");
    if (!id || !p || !t || !cJSON_IsNumber(size) || strcmp(id, s->prepare_id) || strcmp(p, src->path) ||
        strcmp(t, mtime) || (int64_t)size->valuedouble != src->size) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

int shard_write_manifest_done(const SetSettings *s, const CorpusFile *src, const char *stem, int verify,
                  ShardCounts *total) {
    cJSON *m = manifest_read(s, src, stem);
    if (!m)
        return 0;
    const cJSON *shard;
    if (verify)
        cJSON_ArrayForEach(shard, cJSON_GetObjectItemCaseSensitive(m, "shards")) {
            char path[CONFIG_PATH_MAX + 64], why[256];
            const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(shard, "file"));
            snprintf(path, sizeof path, "%s/%s", s->data->shard_dir, file ? file : "?");
            if (!file || h5_check_seal(path, why, sizeof why) != H5_SEAL_OK) {
                rp_log("prepare: %s: %s; preparing %s again", path, file ? why : "unnamed shard",
                       src->path);
                cJSON_Delete(m);
                return 0;
            }
        }
    SplitCounts tr = counts_from(cJSON_GetObjectItemCaseSensitive(m, "train"));
    SplitCounts ev = counts_from(cJSON_GetObjectItemCaseSensitive(m, "eval"));
    add_counts(&total->train, &tr);
    add_counts(&total->eval, &ev);
    total->bad_records += (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "bad_records"));
    total->dropped_sentences +=
        (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "dropped_sentences"));
    cJSON_Delete(m);
    return 1;
}

void shard_write_index(const SetSettings *s, const CorpusList *list) {
    const DataConfig *d = s->data;
    cJSON *root = cJSON_CreateObject(), *sources = cJSON_CreateArray();
    ShardCounts total = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
    /* the shards' train token counts, summed (the unigram baseline pretraining reads from here,
     * so that it opens no shard at start-up): each shard is read through its seal */
    double *token_counts = xcalloc((size_t)s->vocab_size, sizeof *token_counts);
    int64_t *one = xmalloc((size_t)s->vocab_size * sizeof *one);
    for (int i = 0; i < list->count; i++) {
        char stem[18];
        shard_settings_source_stem(stem, s, list->files[i].path);
        cJSON *m = manifest_read(s, &list->files[i], stem);
        RP_CHECK(m, "%s: not prepared yet (no manifest %s/%s.json)", list->files[i].path, d->shard_dir, stem);
        SplitCounts tr = counts_from(cJSON_GetObjectItemCaseSensitive(m, "train"));
        SplitCounts ev = counts_from(cJSON_GetObjectItemCaseSensitive(m, "eval"));
        add_counts(&total.train, &tr);
        add_counts(&total.eval, &ev);
        total.bad_records += (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "bad_records"));
        total.dropped_sentences += (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "dropped_sentences"));
        const cJSON *shard;
        cJSON_ArrayForEach(shard, cJSON_GetObjectItemCaseSensitive(m, "shards")) {
            char path[CONFIG_PATH_MAX + 64];
            const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(shard, "file"));
            snprintf(path, sizeof path, "%s/%s", d->shard_dir, file ? file : "?");
            hid_t f = h5_open(path, 0);
            hsize_t vocab = (hsize_t)s->vocab_size;
            h5_read_int64s(f, path, "train/token_counts", one, 1, &vocab);
            h5_close(f, path);
            for (int v = 0; v < s->vocab_size; v++)
                token_counts[v] += (double)one[v];
        }
        cJSON_DeleteItemFromObjectCaseSensitive(m, "prepare_id");
        cJSON_AddItemToArray(sources, m);
    }
    free(one);
    int64_t docs = total.train.documents + total.eval.documents;
    char fraction[32];
    format_float(fraction, sizeof fraction, d->eval_fraction);
    RP_CHECK(docs > 0, "[data] corpus (%s%s): no document produced a token with vocabulary %s",
             list->files[0].path, list->count > 1 ? ", ..." : "", d->vocab);
    RP_CHECK(total.eval.documents > 0 && total.train.documents > 0,
             "[data] eval_fraction = %s held out %lld of the corpus's %lld documents, leaving %s: "
             "each document is held out with probability eval_fraction (a hash of its text and "
             "data.seed): add documents (blank lines separate them in text files)%s",
             fraction, (long long)total.eval.documents, (long long)docs,
             total.eval.documents ? "none for training" : "none for evaluation",
             total.eval.documents ? " or lower eval_fraction" : ", raise eval_fraction or change data.seed");
    cJSON_AddStringToObject(root, "format", SHARD_SET_FORMAT);
    cJSON_AddStringToObject(root, "prepare_id", s->prepare_id);
    cJSON_AddStringToObject(root, "vocab_md5", s->vocab_md5);
    cJSON_AddNumberToObject(root, "vocab_size", s->vocab_size);
    cJSON_AddBoolToObject(root, "do_lower_case", d->do_lower_case);
    cJSON_AddNumberToObject(root, "seed", (double)d->seed);
    cJSON_AddStringToObject(root, "eval_fraction", fraction);
    cJSON_AddStringToObject(root, "text_field", d->text_field);
    cJSON_AddNumberToObject(root, "shard_tokens", (double)d->shard_tokens);
    cJSON_AddItemToObject(root, "settings", shard_settings_record(d, NULL));
    cJSON_AddItemToObject(root, "train", counts_json(&total.train));
    cJSON_AddItemToObject(root, "eval", counts_json(&total.eval));
    cJSON_AddNumberToObject(root, "bad_records", (double)total.bad_records);
    cJSON_AddNumberToObject(root, "dropped_sentences", (double)total.dropped_sentences);
    cJSON_AddItemToObject(root, "train_token_counts", cJSON_CreateDoubleArray(token_counts, s->vocab_size));
    free(token_counts);
    cJSON_AddItemToObject(root, "sources", sources);
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", d->shard_dir, SHARD_SET_INDEX);
    write_json(path, root);
    cJSON_Delete(root);
}
