/* CoNLL-style tagging files (task.type = tagging): one word per line, whitespace-separated
 * fields, the first the word and the last its label (any number of feature columns between, not
 * read); a blank line ends an example; lines starting with -DOCSTART- are skipped; '\r' line ends
 * and a UTF-8 byte-order mark are removed; a NUL byte is fatal, naming its line. The label
 * CONLL_IGNORED ("_") marks a word that is not scored (the inputs of the synthetic tasks,
 * train/tasks/synth.h): loss and metrics skip it. A file whose lines have one field is unlabelled
 * (predict). Each example becomes one sequence [CLS] pieces... [SEP]; a word's label sits on its
 * first WordPiece, the other pieces are IGNORE_LABEL (as HF's BertForTokenClassification recipes
 * label them); words beyond task.max_seq_len are truncated (reported, scored as wrong). */
#pragma once
#include "train/config/config.h"
#include "train/data/tokenizer.h"
#include "train/tasks/task_data.h"

#define CONLL_IGNORED "_"
#define TAG_MAX_LABELS 256
#define TAG_LABEL_MAX 32

typedef struct {
    int count;
    char names[TAG_MAX_LABELS][TAG_LABEL_MAX];
    int bio; /* every label is O, B-TYPE or I-TYPE: entity-level metrics apply (seqeval) */
} TagLabels;

/* The words of a tagging file and where each landed in its sequence. */
typedef struct {
    int num_examples, num_words;
    int *first_word; /* [num_examples + 1]: example e holds words first_word[e] .. first_word[e+1]-1 */
    char **words;    /* [num_words] */
    int *labels;     /* [num_words] label index; -1: none (CONLL_IGNORED or unlabelled) */
    int *position;   /* [num_words] position of the word's first piece in its sequence; -1: truncated */
    int labelled;    /* every line had a label */
    int truncated;   /* words beyond max_seq_len (or of no piece) */
} TagSet;

/* Parse a space-separated label set (task.tag_labels: each label a config word, %XX for the bytes
 * an INI value cannot hold, core/config/config_schema.h config_word_decode); origin names it in
 * errors. */
void tag_labels_parse(TagLabels *ls, const char *text, const char *origin);
/* Training file facts before any model exists: when task.tag_labels is empty, the file's labels
 * (CONLL_IGNORED excluded) sorted bytewise, written as config words (config_word_encode); when
 * task.train_max_length is 0, its longest example in words. Fatal, naming the file (and line), if
 * it holds no labelled word, a label of TAG_LABEL_MAX bytes or more, or more than TAG_MAX_LABELS. */
void conll_scan(TaskConfig *task, const char *path);
/* A vocabulary for a model trained from scratch on this file: [PAD] [UNK] [CLS] [SEP] [MASK], then
 * the distinct words the tokenizer's basic step makes of the file's words (basic_tokenizer.h, with
 * lower-casing and accent stripping when lower: the tokenizer's own code) sorted bytewise, one per
 * line (caller frees). Every word of the file is thus whole WordPieces of it (one per basic word),
 * never [UNK] unless longer than TOKENIZER_MAX_WORD_CHARS. */
char *conll_vocab(const char *path, int lower);
/* Read a tagging file into sequences of f (f->per_token set) and the words into set. */
void conll_load(TaskFeatures *f, TagSet *set, const TagLabels *ls, const char *path, const Tokenizer *tok,
                BadExamplePolicy policy);
void tag_set_free(TagSet *set);
