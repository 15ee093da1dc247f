/* Reading a shard set's index.json (shard_set.h) as pretraining needs it: every number checked
 * before anything is sized by it, the settings it records compared with the config's (used by
 * shard_set.c); from it, the check that the corpus is the one the set was prepared from and the
 * set's identity (used by pretraining). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "train/config/config.h"
#include "train/data/shard.h"

/* Counts past this are not a shard set's (2^48 tokens is 1 PB of int32): an index claiming them
 * is damaged. */
#define SHARD_INDEX_MAX_COUNT ((int64_t)1 << 48)
#define SHARD_INDEX_MAX_VOCAB (1 << 24)

/* Member `name` of o: an integer in [0, max]; fatal naming path and the member otherwise. */
int64_t shard_index_int(const cJSON *o, const char *name, const char *path, int64_t max);
const char *shard_index_string(const cJSON *o, const char *name, const char *path);
/* The counts object `name` of o: documents <= sentences <= tokens <= SHARD_INDEX_MAX_COUNT (no
 * empty document or sentence is ever written). */
SplitCounts shard_index_counts(const cJSON *o, const char *name, const char *path);

/* index.json of d->shard_dir at path, parsed, its format and vocab_size checked, and its
 * settings (shard_settings.h) compared with d's, before anything else: fatal, naming each
 * setting and both values, if the set was prepared with others. vocab_md5: the md5 of the
 * vocabulary the run uses (the settings' hash, prepare_id, is compared too, which also covers an
 * index written before it recorded its settings). Caller cJSON_Deletes. */
cJSON *shard_index_load(const DataConfig *d, const char *path, const char *vocab_md5);

/* For a fresh run: fatal if a corpus file the set of data->shard_dir was prepared from is here
 * with another size or mtime (edited since and not prepared again: the set holds the old text),
 * naming it and both versions. A file that is absent is not judged (a training machine needs only
 * the set), nor anything when data lists no corpus. A resume is not asked: it continues on the
 * set it trained on, which its checkpoint's data identity pins. */
void shard_index_require_current(const DataConfig *data);

/* The identity of the data shard_set_open opens, as text that the ranks of a job compare and a
 * checkpoint keeps (a resume must continue on the same data): a first line with the set's
 * prepare_id and its index's train and eval totals, then a line per source with its path, size,
 * counts and the digest of its shards' contents (shard_buffer_digest; the mtime where the shards predate
 * it); for old train.h5/eval.h5
 * one line with the CRC-32 of each file's checksum header (which holds the file's own CRC-32 and
 * length). Reads no shard. Caller frees. */
char *shard_index_identity(const DataConfig *data);
