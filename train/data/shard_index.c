/* Reading and checking a shard set's index.json (shard_index.h); from it, the check that the
 * corpus is the one the set was prepared from (shard_index_require_current) and the set's identity
 * (shard_index_identity). */
#include "train/data/shard_index.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/crc32.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "core/rng.h"
#include "train/data/shard_settings.h"

int64_t shard_index_int(const cJSON *o, const char *name, const char *path, int64_t max) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    RP_CHECK(cJSON_IsNumber(v), "%s: member '%s': expected a number", path, name);
    double x = v->valuedouble;
    RP_CHECK(isfinite(x) && x >= 0 && x <= (double)max && x == floor(x),
             "%s: member '%s': expected an integer in [0, %lld], got %.17g: the index is damaged; "
             "`realpos prepare CONFIG.ini` writes it again (keeping every intact shard)",
             path, name, (long long)max, x);
    return (int64_t)x;
}

const char *shard_index_string(const cJSON *o, const char *name, const char *path) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
    RP_CHECK(v, "%s: member '%s': expected a string", path, name);
    return v;
}

SplitCounts shard_index_counts(const cJSON *o, const char *name, const char *path) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, name);
    RP_CHECK(cJSON_IsObject(c), "%s: member '%s': expected an object of counts", path, name);
    SplitCounts n = {shard_index_int(c, "documents", path, SHARD_INDEX_MAX_COUNT),
                     shard_index_int(c, "sentences", path, SHARD_INDEX_MAX_COUNT),
                     shard_index_int(c, "tokens", path, SHARD_INDEX_MAX_COUNT)};
    RP_CHECK(n.documents <= n.sentences && n.sentences <= n.tokens && (n.documents > 0) == (n.tokens > 0),
             "%s: member '%s': %lld documents, %lld sentences, %lld tokens: expected documents <= "
             "sentences <= tokens (a shard set holds no empty document or sentence): the index is "
             "damaged; `realpos prepare CONFIG.ini` writes it again",
             path, name, (long long)n.documents, (long long)n.sentences, (long long)n.tokens);
    return n;
}

void shard_index_require_current(const DataConfig *d) {
    char index[CONFIG_PATH_MAX + 32];
    snprintf(index, sizeof index, "%s/%s", d->shard_dir, SHARD_SET_INDEX);
    if (d->num_corpus == 0 || access(index, R_OK) != 0)
        return; /* a config that names no corpus; an old train.h5/eval.h5 pair, or no set (said later) */
    size_t len;
    char *text = read_file(index, &len, "shard set index");
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *src;
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(root, "sources")) {
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, "path"));
        const char *mtime = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, "mtime_ns"));
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(src, "size");
        struct stat st;
        if (!file || !mtime || !cJSON_IsNumber(size) || stat(file, &st) != 0)
            continue;
        char now[32];
        snprintf(now, sizeof now, "%lld", (long long)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
        RP_CHECK((double)st.st_size == size->valuedouble && !strcmp(now, mtime),
                 "%s: changed since the shard set in %s was prepared from it (then %.0f bytes, mtime_ns %s; now "
                 "%lld bytes, mtime_ns %s): the set holds the old text; run `realpos prepare CONFIG.ini` "
                 "(it prepares this file again and keeps the others' shards)",
                 file, d->shard_dir, size->valuedouble, mtime, (long long)st.st_size, now);
    }
    cJSON_Delete(root);
}

cJSON *shard_index_load(const DataConfig *d, const char *path, const char *vocab_md5) {
    size_t len;
    char *text = read_file(path, &len, "shard set index");
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    RP_CHECK(cJSON_IsObject(root), "%s: not a JSON object", path);
    const char *format = shard_index_string(root, "format", path);
    RP_CHECK(!strcmp(format, SHARD_SET_FORMAT), "%s: member 'format': expected '%s', got '%s'", path,
             SHARD_SET_FORMAT, format);
    int vocab_size = (int)shard_index_int(root, "vocab_size", path, SHARD_INDEX_MAX_VOCAB);
    RP_CHECK(vocab_size > 0, "%s: member 'vocab_size': expected a positive number", path);
    const char *recorded_md5 = shard_index_string(root, "vocab_md5", path);
    if (strcmp(recorded_md5, vocab_md5))
        return root; /* another vocabulary: shard_check_vocab says so, naming it */
    char differences[4096] = "";
    const cJSON *settings = cJSON_GetObjectItemCaseSensitive(root, "settings");
    int n = cJSON_IsObject(settings)
                ? shard_settings_differences(d, NULL, settings, "the set", differences, sizeof differences)
                : 0;
    RP_CHECK(n == 0,
             "[data] shard_dir %s holds a shard set prepared with other settings than this config's "
             "(%s):%s\nthe set is what prepare made of the corpus with its settings: prepare it with "
             "this config (`realpos prepare CONFIG.ini`; another data.shard_dir keeps this set), or "
             "give the config the set's setting%s",
             d->shard_dir, path, differences, n > 1 ? "s" : "");
    SetSettings now;
    shard_settings_init(&now, d, vocab_md5, vocab_size);
    const char *id = shard_index_string(root, "prepare_id", path);
    RP_CHECK(!strcmp(id, now.prepare_id),
             "[data] shard_dir %s holds a shard set prepared with other settings than this config's "
             "(%s: prepare_id %s, this config's %s; the index predates the record of each setting, "
             "so it cannot say which of data.corpus_format, text_field, do_lower_case, eval_fraction, "
             "seed, shard_tokens differs): run `realpos prepare CONFIG.ini`",
             d->shard_dir, path, id, now.prepare_id);
    return root;
}

/* ---- the identity of a set ----------------------------------------------------------------- */

static void append(char **text, size_t *len, size_t *cap, const char *line) {
    size_t n = strlen(line);
    if (*len + n + 2 > *cap) {
        *cap = 2 * (*len + n + 2);
        *text = realloc(*text, *cap);
        RP_CHECK(*text, "out of memory describing the shard set");
    }
    memcpy(*text + *len, line, n);
    *len += n;
    (*text)[(*len)++] = '\n';
    (*text)[*len] = '\0';
}

/* One line per source: its path, size, counts and the digest of its shards' contents. */
static void source_lines(const cJSON *root, const char *path, char **text, size_t *len, size_t *cap) {
    const cJSON *src, *sh;
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(root, "sources")) {
        uint64_t digest = hash64(0x736f75726365ULL);
        int known = 1, shards = 0;
        cJSON_ArrayForEach(sh, cJSON_GetObjectItemCaseSensitive(src, "shards")) {
            const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sh, "digest"));
            known &= d != NULL;
            digest = hash64(digest ^ (d ? strtoull(d, NULL, 16) : 0));
            shards++;
        }
        SplitCounts tr = shard_index_counts(src, "train", path), ev = shard_index_counts(src, "eval", path);
        const char *mtime = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, "mtime_ns"));
        /* the contents' digest when the shards record it (a file touched and prepared again is
         * the same data), else the source's mtime stands for its version */
        char line[CONFIG_PATH_MAX + 256], version[64];
        if (known)
            snprintf(version, sizeof version, "contents %016llx", (unsigned long long)digest);
        else
            snprintf(version, sizeof version, "mtime_ns %s, contents not recorded", mtime ? mtime : "?");
        snprintf(line, sizeof line, "  source %s: %lld bytes, %d shard%s (%s), %lld + %lld documents, %lld + %lld tokens",
                 shard_index_string(src, "path", path),
                 (long long)shard_index_int(src, "size", path, INT64_MAX / 2), shards, shards == 1 ? "" : "s",
                 version, (long long)tr.documents, (long long)ev.documents, (long long)tr.tokens,
                 (long long)ev.tokens);
        append(text, len, cap, line);
    }
}

char *shard_index_identity(const DataConfig *d) {
    char index[CONFIG_PATH_MAX + 32], line[CONFIG_PATH_MAX + 256];
    char *text = NULL;
    size_t len = 0, cap = 0;
    snprintf(index, sizeof index, "%s/%s", d->shard_dir, SHARD_SET_INDEX);
    if (access(index, R_OK) == 0) {
        size_t n;
        char *json = read_file(index, &n, "shard set index");
        cJSON *root = cJSON_ParseWithLength(json, n);
        free(json);
        RP_CHECK(cJSON_IsObject(root), "%s: not a JSON object", index);
        SplitCounts train = shard_index_counts(root, "train", index), eval = shard_index_counts(root, "eval", index);
        snprintf(line, sizeof line,
                 "shard set prepare_id %s, %lld + %lld documents, %lld + %lld tokens (train + eval), "
                 "%d sources:",
                 shard_index_string(root, "prepare_id", index), (long long)train.documents,
                 (long long)eval.documents, (long long)train.tokens, (long long)eval.tokens,
                 cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "sources")));
        append(&text, &len, &cap, line);
        source_lines(root, index, &text, &len, &cap);
        cJSON_Delete(root);
        return text;
    }
    Crc32Tables *tables = xmalloc(sizeof *tables);
    crc32_tables_init(tables);
    uint32_t crc[2];
    const char *split[2] = {"train", "eval"};
    for (int i = 0; i < 2; i++) {
        char path[CONFIG_PATH_MAX + 16], header[H5_USER_BLOCK];
        shard_path(path, sizeof path, d->shard_dir, split[i]);
        int fd = open(path, O_RDONLY);
        RP_CHECK(fd >= 0, "%s: cannot open: %s", path, strerror(errno));
        ssize_t got = pread(fd, header, sizeof header, 0);
        close(fd);
        RP_CHECK(got == (ssize_t)sizeof header, "%s: shorter than its %d-byte checksum header", path, H5_USER_BLOCK);
        crc[i] = crc32_update(tables, 0, header, sizeof header);
    }
    free(tables);
    snprintf(line, sizeof line, "old shards: train.h5 header CRC-32 %08x, eval.h5 %08x", (unsigned)crc[0],
             (unsigned)crc[1]);
    append(&text, &len, &cap, line);
    return text;
}
