/* The Shard: the documents of one split (train or eval), as the instance streams read them, in
 * memory or lazily from the shard files of a set (shard_set.h opens one), and the two formats it
 * is read from.
 *
 * Old format (realpos-shard-1, still loaded whole by shard_load): shard_dir/train.h5 and
 * eval.h5, each
 *   /tokens            int32 [T]     token ids of every sentence, concatenated
 *   /sentence_offsets  int64 [S + 1] sentence s is tokens[off[s], off[s + 1]), never empty
 *   /document_offsets  int64 [D + 1] document d is sentences [doff[d], doff[d + 1]), never empty
 * and root attributes: format ("realpos-shard-1"), split, vocab_size, do_lower_case, vocab_md5
 * (MD5 of the vocabulary file's bytes, as `md5sum` prints it), sources, seed, eval_fraction.
 *
 * Shard sets (SHARD_SET_FORMAT): an index.json and shard files of both splits (shard_set.h). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "train/config/config.h"
#include "train/data/tokenizer.h"

#define SHARD_FORMAT "realpos-shard-1"
#define SHARD_SET_FORMAT "realpos-shard-set-1"
#define SHARD_SET_INDEX "index.json"

typedef struct ShardPart ShardPart;   /* one split of one shard file, read lazily */
typedef struct ShardFiles ShardFiles; /* a set's open shard files, shared by its two splits */

typedef struct {
    int64_t documents, sentences, tokens;
} SplitCounts;

/* The documents of one split: in memory (tokens and offsets arrays: an old-format shard, tests),
 * or lazily read from the shard files of a set (parts != NULL, the arrays NULL; read them with
 * the accessors below). Global indices run over the parts in order. */
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

/* "<shard_dir>/<split>.h5", an old-format shard, into out (fatal if it does not fit). */
void shard_path(char *out, size_t size, const char *shard_dir, const char *split);

/* Load and validate an old-format shard (format, shapes, offsets monotone and in range, ids <
 * vocab_size, no empty sentence or document); fatal with the path and dataset on any mismatch. */
Shard *shard_load(const char *path);
/* Free a Shard of either kind (a lazy one drops its hold on its set's files; the last closes them). */
void shard_free(Shard *shard);
/* Fatal unless the shard was made from exactly this vocabulary text and lower-casing, e.g. the
 * vocabulary file read for training or the copy stored in a checkpoint. */
void shard_check_vocab(const Shard *shard, const char *vocab_text, size_t len, int do_lower_case,
                       const char *vocab_origin);
/* The most frequent token of a shard that is not a special token (the unigram baseline). */
int shard_most_frequent_token(const Shard *shard, SpecialTokens special);

/* Verify every shard file of a lazy Shard now, as its first reads would; nothing for an in-memory
 * shard. Fatal on the first bad shard, naming it. */
void shard_verify(const Shard *s);

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

/* ---- a lazy Shard's files, as the opener (shard_set.c) fills them ---------------------------- */

/* One shard file of a set, shared by the set's train and eval Shards. */
typedef struct {
    int fd;               /* opened at start-up and kept: every read is of this one file */
    int ready;            /* seal verified, datasets located: at the first read of either split */
    char name[64];        /* in shard_dir */
    SplitCounts count[2]; /* train, eval: from index.json */
    /* what index.json says the shard holds: its source's version and its contents' digest (0:
     * not recorded), checked at the first read against the shard's own attributes */
    int64_t source_size;
    char source_mtime[24];
    uint64_t digest;
    off_t at[2][3];       /* file offsets of {train, eval} x {tokens, sentence_offsets, document_offsets} */
} ShardFile;

struct ShardFiles { /* released by the last of the set's two Shards */
    int refs, count;
    char dir[CONFIG_PATH_MAX], index[CONFIG_PATH_MAX + 32], prepare_id[17];
    ShardFile file[];
};

struct ShardPart {
    ShardFile *file;
    int split;                                 /* 0 train, 1 eval */
    int64_t doc_base, sent_base, tok_base;     /* global index of the part's first element */
    int64_t num_documents, num_sentences, num_tokens;
};

/* "<dir>/<name>" of shard file f of set into out. */
void shard_file_path(char *out, size_t size, const ShardFiles *set, const ShardFile *f);
/* Make f readable: verify its whole seal through the descriptor reads will use, then (libhdf5
 * sees only a verified file) check its format and prepare_id and locate both splits' datasets,
 * their sizes checked against the index. Once per file and process: the descriptor stays open,
 * so later reads are of these same verified bytes. */
void shard_file_ready(const ShardFiles *set, ShardFile *f);
