/* Shard sets: what `realpos prepare` writes into [data] shard_dir and pretraining reads lazily.
 *
 * Files (shard_dir):
 *   index.json           the set: format, prepare_id, settings, vocabulary, every source file with
 *                        its shards and counts, train_token_counts (the shards' /train/token_counts
 *                        summed); written last (its presence means complete)
 *   s<KEY>-<K>.h5        shard K (0, 1, ...) of the source file whose key is KEY (16 hex digits,
 *                        a hash of the prepare settings and the source path)
 *   s<KEY>.json          the source's manifest (its shards, counts, bad records): marks it done
 *   prepare-parts.txt    while the set is being prepared: N of the `--part I/N` processes (1: one
 *                        whole prepare) writing it and their settings (shard_settings.h);
 *                        removed just before the index is written
 *   .lock, .lock-part-I-of-N, .lock-index   the writers' flocks (core/dir_lock.h; the last:
 *                        whoever holds it and finds every source done writes the index)
 * Each shard holds whole consecutive documents of one source, about data.shard_tokens tokens,
 * split into its training and held-out documents, and is sealed with a CRC-32 (core/h5io.h):
 *   /{train,eval}/tokens            int32 [T]     (contiguous: read in place with pread)
 *   /{train,eval}/sentence_offsets  int64 [S + 1] sentence s is tokens[off[s], off[s + 1])
 *   /{train,eval}/document_offsets  int64 [D + 1] document d is sentences [doff[d], doff[d + 1])
 *   /train/token_counts             int64 [vocab_size] (the unigram baseline)
 * and root attributes: format (SHARD_SET_FORMAT), prepare_id, vocab_size, do_lower_case,
 * vocab_md5, seed, eval_fraction, source, source_size, source_mtime_ns, shard (K), input_end
 * (decompressed bytes of the source consumed through this shard), line_end, bad_records,
 * dropped_sentences.
 *
 * prepare_id is a hash of every setting a shard depends on (format, vocabulary md5, lower-casing,
 * seed, eval_fraction, corpus_format, text_field, shard_tokens): every shard of one prepare, by
 * any number of processes or increments, carries the same id, and pretraining refuses a set whose
 * train and eval shards, or index, disagree on it. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/shard.h"

#define SHARD_SET_FORMAT "realpos-shard-set-1"
#define SHARD_SET_INDEX "index.json"

/* The documents of one split of data->shard_dir for training (split "train") or evaluation
 * ("eval"), checked against this vocabulary text and lower-casing (vocab_origin names it in
 * messages). A shard set is opened from its index alone: each shard file is opened and its
 * checksum header and length checked (512 bytes each), and the train token counts come from the
 * index. A shard's whole CRC-32 seal is verified, its format and prepare_id checked and its
 * datasets located at the first read of it (by either split; once per process: the descriptor
 * stays open), so a corrupt shard is fatal, naming it, when the stream reaches it. Tokens and
 * offsets are read on demand. An old train.h5/eval.h5 pair is loaded whole as before. Fatal, with
 * the one command that fixes it, on a missing or incomplete set, another vocabulary, a shard whose
 * prepare_id, format or counts differ from the index. */
void shard_set_open(const DataConfig *data, const char *vocab_text, size_t vocab_len,
                    const char *vocab_origin, Shard **train, Shard **eval);

/* For a fresh run: fatal if a corpus file the set of data->shard_dir was prepared from is here
 * with another size or mtime (edited since and not prepared again: the set holds the old text),
 * naming it and both versions. A file that is absent is not judged (a training machine needs only
 * the set), nor anything when data lists no corpus. A resume is not asked: it continues on the
 * set it trained on, which its checkpoint's data identity pins. */
void shard_set_require_current(const DataConfig *data);

/* Verify every shard of the set s (a Shard from shard_set_open) now, as its first reads would;
 * nothing for an in-memory shard. Fatal on the first bad shard, naming it. */
void shard_set_verify(const Shard *s);

/* The identity of the data shard_set_open opens, as text that the ranks of a job compare and a
 * checkpoint keeps (a resume must continue on the same data): a first line with the set's
 * prepare_id and its index's train and eval totals, then a line per source with its path, size,
 * counts and the digest of its shards' contents (shard_digest; the mtime where the shards predate
 * it); for old train.h5/eval.h5
 * one line with the CRC-32 of each file's checksum header (which holds the file's own CRC-32 and
 * length). Reads no shard. Caller frees. */
char *shard_set_identity(const DataConfig *data);

/* ---- the partition of a prepare in progress (the writer's side) ----------------------------- */

#define SHARD_SET_PARTS "prepare-parts.txt"

/* (Claiming, finishing: shard_write.h.) */
/* Fatal, naming dir, both N's and what to run: two partitions of the corpus list would leave some
 * sources to no part and give others to two parts at once. */
_Noreturn void shard_set_refuse_parts(const char *dir, int recorded, int num_parts);
/* Every source is done: forget the partition (called before the index is written, so that a kill
 * in between leaves a set any prepare completes). */
void shard_set_release_parts(const char *dir);

/* ---- read access for instance streams (in-memory and lazy shards alike) ---------------------- */

/* Sentences of document doc (0 <= doc < num_documents), as global sentence indices. */
void shard_document(const Shard *s, int64_t doc, int64_t *first_sentence, int64_t *num_sentences);

/* A window of consecutive sentence offsets, owned by the reader (an instance stream), so that a
 * lazy shard is read in blocks. A Shard is shared by its readers; the one thing a read changes is
 * a shard file's state at its first read (verified, located): readers run on one thread. */
#define SHARD_WINDOW 1024
typedef struct {
    int64_t first, count;                /* global sentences [first, first + count) cached */
    int64_t offsets[SHARD_WINDOW + 1];   /* their global token offsets, and the next one */
} ShardWindow;
void shard_window_reset(ShardWindow *w);
/* Global tokens [*from, *to) of global sentence sent. */
void shard_sentence(const Shard *s, ShardWindow *w, int64_t sent, int64_t *from, int64_t *to);
/* n tokens from global token index from into out; fatal on an id outside [0, vocab_size). */
void shard_read_tokens(const Shard *s, int64_t from, int64_t n, int32_t *out);
