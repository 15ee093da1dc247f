/* Corpus preparation (text -> tokenized HDF5 shards) and shard loading.
 *
 * Input: the [data] corpus files, plain UTF-8, one sentence per line, a blank line (or the end of
 * a file) between documents. Each sentence is tokenized once; sentences that produce no token are
 * dropped, and so are documents left without a sentence.
 *
 * Output, in [data] shard_dir: train.h5 and eval.h5, the documents split at random (seeded by
 * [data] seed) so that round(eval_fraction * D) documents, at least one, are held out. Each file:
 *   /tokens            int32 [T]     token ids of every sentence, concatenated
 *   /sentence_offsets  int64 [S + 1] sentence s is tokens[off[s], off[s + 1]), never empty
 *   /document_offsets  int64 [D + 1] document d is sentences [doff[d], doff[d + 1]), never empty
 * and root attributes: format ("realpos-shard-1"), split ("train" | "eval"), vocab_size,
 * do_lower_case, vocab_md5 (MD5 of the vocabulary file's bytes, as `md5sum` prints it), sources
 * (corpus paths, one per line), seed, eval_fraction. Documents keep their corpus order. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "train/config/config.h"
#include "train/data/tokenizer.h"

#define SHARD_FORMAT "realpos-shard-1"

typedef struct {
    char path[CONFIG_PATH_MAX];
    int32_t *tokens;           /* [num_tokens] */
    int64_t *sentence_offsets; /* [num_sentences + 1] into tokens */
    int64_t *document_offsets; /* [num_documents + 1] into sentences */
    int64_t num_tokens, num_sentences, num_documents;
    int vocab_size, do_lower_case;
    char vocab_md5[33];
    char *sources; /* corpus paths, one per line */
} Shard;

typedef struct {
    int64_t documents, sentences, tokens;
} SplitCounts;

typedef struct {
    SplitCounts train, eval;
    int64_t dropped_sentences; /* lines that produced no token */
    double seconds_read, seconds_tokenize, seconds_write;
} PrepareReport;

/* Tokenize data->corpus with data->vocab and write shard_dir/{train,eval}.h5 atomically (each
 * written to a temporary file, then renamed). Fatal, naming the file or key, on a missing corpus
 * file, a corpus without sentences or without tokens, a vocabulary without the special tokens,
 * or a split that leaves no training document. Tokenization runs on all OpenMP threads; the
 * result does not depend on their number. */
PrepareReport corpus_prepare(const DataConfig *data);

/* "<shard_dir>/<split>.h5" into out (fatal if it does not fit). */
void shard_path(char *out, size_t size, const char *shard_dir, const char *split);

/* Load and validate a shard (format, shapes, offsets monotone and in range, ids < vocab_size,
 * no empty sentence or document); fatal with the path and dataset on any mismatch. */
Shard *shard_load(const char *path);
void shard_free(Shard *shard);
/* Fatal unless the shard was made from exactly this vocabulary text and lower-casing, e.g. the
 * vocabulary file read for training or the copy stored in a checkpoint. */
void shard_check_vocab(const Shard *shard, const char *vocab_text, size_t len, int do_lower_case,
                       const char *vocab_origin);

/* MD5 of a byte string as 32 lower-case hex digits and a terminating NUL (RFC 1321). */
void md5_hex(const void *data, size_t len, char out[33]);

/* The most frequent token of a shard that is not a special token (the unigram baseline). */
int shard_most_frequent_token(const Shard *shard, SpecialTokens special);
