/* The writer's side of a shard set being prepared (format in shard_set.h), by one process or by
 * N processes each with its part (--part I/N): the record of the prepare in progress
 * (shard_dir/prepare-parts.txt: its N and its settings, shard_settings.h), and the lock under which
 * whoever finds every source done writes the index. */
#pragma once

#include "train/data/corpus_list.h"
#include "train/data/shard_settings.h"

#define SHARD_SET_PARTS "prepare-parts.txt"

/* The record of dir's prepare in progress (SHARD_SET_PARTS): "N\n" and the settings of
 * s (shard_settings.h) as JSON, created atomically (link(2)): of processes starting side by side,
 * one records its N and settings and the others compare with them. Fatal, naming each setting and
 * both values, if a prepare in progress recorded other settings (except a whole prepare after a
 * stopped whole prepare: it starts over, replacing the record). Returns num_parts, or the other N
 * recorded: then the caller may go on only if no source is left to prepare, else
 * shard_parts_refuse. */
int shard_parts_claim(const SetSettings *s, int num_parts);
/* The set is about to change: remove its index.json, so that a prepare interrupted from here on
 * leaves no index beside shards it does not list (pretraining then says to run prepare). */
void shard_parts_drop_index(const char *dir);
/* After this process's sources: under an exclusive lock on shard_dir/.lock-index, if every source
 * of list is done, forget the partition and write the index (unless another process did since).
 * Returns 1 if the set is complete, 0 if other parts have sources left. */
int shard_parts_finish(const SetSettings *s, const CorpusList *list);
/* Fatal, naming dir, both N's and what to run: two partitions of the corpus list would leave some
 * sources to no part and give others to two parts at once. */
_Noreturn void shard_parts_refuse(const char *dir, int recorded, int num_parts);
