/* Shard sets: what `realpos prepare` writes into [data] shard_dir (corpus_prepare.h, shard_write.h)
 * and pretraining reads lazily (opened here; read through the Shard accessors of shard.h).
 *
 * Files (shard_dir):
 *   index.json           the set: format, prepare_id, settings, vocabulary, every source file with
 *                        its shards and counts, train_token_counts (the shards' /train/token_counts
 *                        summed); written last (its presence means complete)
 *   s<KEY>-<K>.h5        shard K (0, 1, ...) of the source file whose key is KEY (16 hex digits,
 *                        a hash of the prepare settings and the source path)
 *   s<KEY>.json          the source's manifest (its shards, counts, bad records): marks it done
 *   prepare-parts.txt    while the set is being prepared: N of the `--part I/N` processes (1: one
 *                        whole prepare) writing it and their settings (shard_parts.h);
 *                        removed just before the index is written
 *   .lock, .lock-part-I-of-N, .lock-index   the writers' flocks (core/io/dir_lock.h; the last:
 *                        whoever holds it and finds every source done writes the index)
 * Each shard holds whole consecutive documents of one source, about data.shard_tokens tokens,
 * split into its training and held-out documents, and is sealed with a CRC-32 (core/io/h5io.h):
 *   /{train,eval}/tokens            int32 [T]     (contiguous: read in place with pread)
 *   /{train,eval}/sentence_offsets  int64 [S + 1] sentence s is tokens[off[s], off[s + 1])
 *   /{train,eval}/document_offsets  int64 [D + 1] document d is sentences [doff[d], doff[d + 1])
 *   /train/token_counts             int64 [vocab_size] (the unigram baseline)
 * and root attributes: format (SHARD_SET_FORMAT, shard.h), prepare_id, vocab_size, do_lower_case,
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
