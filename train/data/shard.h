/* Corpus preparation (corpus files -> a shard set, corpus_prepare.c; the set's format and lazy
 * reading in shard_set.h) and the old single-file shards.
 *
 * Input: the [data] corpus entries (files, directories, globs, `**` at any depth; plain, gzip
 * or zstd, detected by content; text or JSON Lines by data.corpus_format, `auto` by the name:
 * corpus_reader.h). Text files: UTF-8, one sentence per line (LF or CRLF), a blank line (only
 * whitespace, as Python's str.isspace) or the end of a file between documents. JSON Lines: one
 * document per line, the string member data.text_field holding its text (read by core/json.h),
 * whose lines are its sentences; a line that is not valid JSON (a repeated key, two records on
 * the line), not an object, lacks the member or holds a non-string is a bad record, named
 * (file:line, the reason and column) on stderr and counted. Sentences that produce no token are dropped and counted, and so are documents
 * left without a sentence.
 *
 * Old format (realpos-shard-1, still loaded whole by shard_load): shard_dir/train.h5 and
 * eval.h5, each
 *   /tokens            int32 [T]     token ids of every sentence, concatenated
 *   /sentence_offsets  int64 [S + 1] sentence s is tokens[off[s], off[s + 1]), never empty
 *   /document_offsets  int64 [D + 1] document d is sentences [doff[d], doff[d + 1]), never empty
 * and root attributes: format ("realpos-shard-1"), split, vocab_size, do_lower_case, vocab_md5
 * (MD5 of the vocabulary file's bytes, as `md5sum` prints it), sources, seed, eval_fraction. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/tokenizer.h"

#define SHARD_FORMAT "realpos-shard-1"

typedef struct ShardPart ShardPart;   /* one split of one shard file, read lazily (shard_set.c) */
typedef struct ShardFiles ShardFiles; /* a set's open shard files, shared by its two splits */

/* The documents of one split: in memory (tokens and offsets arrays: an old-format shard, tests),
 * or lazily read from the shard files of a set (parts != NULL, the arrays NULL; read them with
 * the accessors of shard_set.h). Global indices run over the parts in order. */
typedef struct {
    char path[CONFIG_PATH_MAX];
    int32_t *tokens;           /* [num_tokens] */
    int64_t *sentence_offsets; /* [num_sentences + 1] into tokens */
    int64_t *document_offsets; /* [num_documents + 1] into sentences */
    int64_t num_tokens, num_sentences, num_documents;
    int vocab_size, do_lower_case;
    char vocab_md5[33];
    char *sources; /* corpus paths, one per line */
    ShardPart *parts;          /* lazy: [num_parts], in the shard files of `files` */
    int num_parts;
    ShardFiles *files;
    int64_t *token_counts;     /* lazy: [vocab_size] token frequencies of the split */
} Shard;

typedef struct {
    int64_t documents, sentences, tokens;
} SplitCounts;

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
 * another num_parts than the unfinished prepare of data->shard_dir (shard_set_claim_parts).
 * Tokenization runs on all OpenMP threads; the result does not depend on their number. */
PrepareReport corpus_prepare(const DataConfig *data, int part, int num_parts);

/* "<shard_dir>/<split>.h5" into out (fatal if it does not fit). */
void shard_path(char *out, size_t size, const char *shard_dir, const char *split);

/* Load and validate a shard (format, shapes, offsets monotone and in range, ids < vocab_size,
 * no empty sentence or document); fatal with the path and dataset on any mismatch. */
Shard *shard_load(const char *path);
void shard_free(Shard *shard);
/* Drop one Shard's hold on its set's files; the last closes them (shard_set.c). */
void shard_files_release(ShardFiles *files);
/* Fatal unless the shard was made from exactly this vocabulary text and lower-casing, e.g. the
 * vocabulary file read for training or the copy stored in a checkpoint. */
void shard_check_vocab(const Shard *shard, const char *vocab_text, size_t len, int do_lower_case,
                       const char *vocab_origin);

/* MD5 of a byte string as 32 lower-case hex digits and a terminating NUL (RFC 1321). */
void md5_hex(const void *data, size_t len, char out[33]);

/* The most frequent token of a shard that is not a special token (the unigram baseline). */
int shard_most_frequent_token(const Shard *shard, SpecialTokens special);
