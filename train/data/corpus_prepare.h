/* Corpus preparation: the [data] corpus files -> a shard set (the format: shard_set.h; writing it:
 * shard_write.h, shard_parts.h), in bounded memory, by one process or several (--part I/N).
 *
 * Input: the [data] corpus entries (files, directories, globs, `**` at any depth; plain, gzip
 * or zstd, detected by content; text or JSON Lines by data.corpus_format, `auto` by the name:
 * corpus_reader.h, corpus_list.h). Text files: UTF-8, one sentence per line (LF or CRLF), a blank
 * line (only whitespace, as Python's str.isspace) or the end of a file between documents. JSON
 * Lines: one document per line, the string member data.text_field holding its text (read by
 * core/io/json.h), whose lines are its sentences; a line that is not valid JSON (a repeated key, two
 * records on the line), not an object, lacks the member or holds a non-string is a bad record,
 * named (file:line, the reason and column) on stderr and counted. Sentences that produce no token
 * are dropped and counted, and so are documents left without a sentence. */
#pragma once
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/shard.h"

typedef struct {
    SplitCounts train, eval; /* of every source, prepared now or before */
    int64_t dropped_sentences; /* lines that produced no token */
    int64_t bad_records;       /* JSON Lines records without a string text member */
    int64_t unknown_tokens;    /* [UNK] among the tokens prepared now */
    int unknown_sources;       /* sources prepared now with over TOKENIZER_UNKNOWN_WARN [UNK] */
    int64_t bytes;             /* decompressed input bytes tokenized now */
    int sources, sources_kept; /* corpus files; those already prepared (kept) */
    int shards_written, shards_kept;
    int index_written;         /* 0: other parts (--part) have sources still to prepare */
    char prepare_id[17];
    double seconds_read, seconds_tokenize, seconds_write, seconds_total;
} PrepareReport;

/* Prepare the sources i with i % num_parts == part (of the expanded corpus list) into the shard
 * set of data->shard_dir: a source whose manifest and shards are intact is kept, one with some
 * intact shards is read on from their end, the others are prepared; then, if every source is
 * done, the index is written. Any number of processes, each with its own part, give the same set
 * as one. Fatal, naming the file or key, on a missing corpus file, a duplicate, a vocabulary
 * without the special tokens, CR-only line ends, a set left without train or eval documents, or
 * another num_parts than the unfinished prepare of data->shard_dir (shard_parts_claim).
 * Tokenization runs on all OpenMP threads; the result does not depend on their number. */
PrepareReport corpus_prepare(const DataConfig *data, int part, int num_parts);
