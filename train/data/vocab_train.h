/* WordPiece vocabulary training (the algorithm of HuggingFace tokenizers' WordPieceTrainer:
 * byte-pair-encoding merges by pair frequency over "##"-prefixed continuation pieces).
 *
 * Words are counted with the basic tokenizer (words over TOKENIZER_MAX_WORD_CHARS code points
 * are skipped: they always become [UNK]). Every word starts as its characters: the first as
 * itself, the others as "##c". The most frequent adjacent pair of pieces (ties: the smaller
 * piece ids, left then right) is then merged everywhere, "ab" + "##c" -> "abc" and "##ab" + "##c"
 * -> "##abc", until the vocabulary has `size` tokens or no pair occurs twice.
 *
 * Vocabulary order: [PAD] [UNK] [CLS] [SEP] [MASK], every character of the corpus in code point
 * order, the same as "##" continuations, then the merged pieces in the order they were made. As
 * every character is in both forms, every word of the corpus tokenizes without [UNK]. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int tokens;             /* vocabulary size reached */
    int special;            /* special tokens */
    int characters;         /* distinct characters (each present twice) */
    int merges;             /* merged pieces added */
    int64_t words;          /* words in the corpus */
    int64_t distinct_words; /* distinct words trained on */
} VocabTrainStats;

/* Train on the files (fatal naming the file if one cannot be read, or if `size` cannot hold the
 * special tokens and both forms of every character). Returns the vocab.txt text (malloc'd, one
 * token per line), its length in *len, and statistics in *stats. */
char *vocab_train(const char **corpus_paths, int corpus_count, int size, int lower_case,
                  size_t *len, VocabTrainStats *stats);
