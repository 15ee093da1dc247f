/* The [data] settings that shape a shard set, by name: what `realpos prepare` made of the corpus.
 * They are recorded in the set's index.json ("settings") and in the record of a prepare in
 * progress (prepare-parts.txt), and compared with a config's before anything is read or written:
 *   data.corpus          the entries as listed (files, directories, globs)
 *   data.corpus_format   data.text_field   data.do_lower_case   data.eval_fraction
 *   data.seed            data.shard_tokens
 *   data.vocab           by its md5 (the record of a prepare in progress; the index's vocabulary
 *                        is checked by shard_check_vocab, with the vocabulary's own message)
 * One table (shard_settings.c) drives recording and comparing, so a setting added to the
 * prepare is checked everywhere by adding one row. Settings that change how the set is made but
 * not what it holds (read_chunk_mb, threads) are not in it. */
#pragma once
#include <stddef.h>

#include <cjson/cJSON.h>

#include "train/config/config.h"

/* {"data.corpus": [...], "data.eval_fraction": "0.02", ...}: every shaping setting of d, and
 * data.vocab as "md5 HEX" if vocab_md5 is given. Caller cJSON_Deletes. */
cJSON *shard_settings_record(const DataConfig *d, const char *vocab_md5);

/* Compare d (and vocab_md5, if given) with a record made by shard_settings_record: for each
 * setting that differs, append "\n  key 'K': RECORDED_BY has A, this config B" to out (size
 * bytes, kept NUL-terminated; "..." if it overflows). Settings the record lacks (one written by
 * an older realpos) are not compared, nor data.corpus when d lists none (a config that only
 * trains on a set prepared elsewhere). Returns the number of differences. */
int shard_settings_differences(const DataConfig *d, const char *vocab_md5, const cJSON *recorded,
                               const char *recorded_by, char *out, size_t size);

/* The settings every shard of a set shares (prepare_id is their hash, as 16 hex digits). */
typedef struct {
    const DataConfig *data;
    char vocab_md5[33];
    int vocab_size;
    char prepare_id[17];
} SetSettings;

/* s for a prepare of data with this vocabulary: prepare_id the hash of every shaping setting. */
void shard_settings_init(SetSettings *s, const DataConfig *data, const char *vocab_md5, int vocab_size);
/* "s<16 hex digits>", a hash of the prepare_id and source_path: the file stem of a source's shards and manifest. */
void shard_settings_source_stem(char out[18], const SetSettings *s, const char *source_path);
