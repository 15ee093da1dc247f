/* CoNLL-style tagging files (conll.h). */
#include "train/tasks/conll.h"

#include <ctype.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "layers/layers.h"
#include "train/data/basic_tokenizer.h"

enum { CONLL_MAX_PIECES = 64 };

/* One line split in place into whitespace-separated fields: the first in *first, the last in *last
 * (any number between: feature columns are not read); returns their number. */
static int split_fields(char *line, char **first, char **last) {
    int n = 0;
    for (char *s = line; *s;) {
        while (*s && isspace((unsigned char)*s))
            *s++ = 0;
        if (!*s)
            break;
        *(n++ ? last : first) = s;
        while (*s && !isspace((unsigned char)*s))
            s++;
    }
    return n;
}

/* Calls visit(word, label or NULL, example, line number, ctx) for every word line of the file and
 * end(example, ctx) after each example; returns the number of examples. */
typedef struct {
    void (*word)(void *ctx, const char *word, const char *label, int example, int line);
    void (*end)(void *ctx, int example);
    void *ctx;
} ConllVisitor;

static int conll_walk(const char *path, const ConllVisitor *v) {
    size_t len;
    char *text = read_file(path, &len, "tagging data");
    char *s = text, *word = NULL, *label = NULL;
    const char *nul = memchr(text, '\0', len); /* would end the text early: the rest unread */
    if (nul) {
        int line = 1;
        for (const char *c = text; c < nul; c++)
            line += *c == '\n';
        RP_FATAL("%s:%d: expected text, got a NUL byte (a binary or UTF-16 file?)", path, line);
    }
    if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
        s += 3;
    int examples = 0, words_in_example = 0, line_no = 0;
    while (*s) {
        char *line = s, *nl = strchr(s, '\n');
        s = nl ? nl + 1 : s + strlen(s);
        if (nl)
            *nl = 0;
        line_no++;
        int n = split_fields(line, &word, &label);
        if (n > 0 && !strncmp(word, "-DOCSTART-", 10))
            continue;
        if (n == 0) {
            if (words_in_example) {
                if (v->end)
                    v->end(v->ctx, examples);
                examples++;
            }
            words_in_example = 0;
            continue;
        }
        v->word(v->ctx, word, n > 1 ? label : NULL, examples, line_no);
        words_in_example++;
    }
    if (words_in_example) {
        if (v->end)
            v->end(v->ctx, examples);
        examples++;
    }
    free(text);
    return examples;
}

static int label_is_bio(const char *name) {
    return !strcmp(name, "O") || ((name[0] == 'B' || name[0] == 'I') && name[1] == '-' && name[2]);
}

void tag_labels_parse(TagLabels *ls, const char *text, const char *origin) {
    memset(ls, 0, sizeof *ls);
    char *copy = xstrdup(text);
    ls->bio = 1;
    for (char *s = copy; *s;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        char *encoded = s, word[CONFIG_PATH_MAX];
        while (*s && *s != ' ' && *s != '\t')
            s++;
        if (*s)
            *s++ = 0;
        RP_CHECK(strlen(encoded) < sizeof word, "%s: a label of %zu bytes", origin, strlen(encoded));
        config_word_decode(word, encoded, strlen(encoded)); /* %XX: a byte the config cannot hold */
        RP_CHECK(ls->count < TAG_MAX_LABELS, "%s: more than %d labels", origin, TAG_MAX_LABELS);
        RP_CHECK(strlen(word) < TAG_LABEL_MAX, "%s: label '%s' is longer than %d bytes", origin, word,
                 TAG_LABEL_MAX - 1);
        RP_CHECK(strcmp(word, CONLL_IGNORED), "%s: '%s' is the unscored label, not one of the label set", origin,
                 CONLL_IGNORED);
        for (int i = 0; i < ls->count; i++)
            RP_CHECK(strcmp(ls->names[i], word), "%s: label '%s' appears twice", origin, word);
        size_t length = strlen(word); /* < TAG_LABEL_MAX, checked above */
        memcpy(ls->names[ls->count++], word, length + 1);
        ls->bio &= label_is_bio(word);
    }
    free(copy);
    RP_CHECK(ls->count >= 1, "%s: expected at least one label, got '%s'", origin, text);
}

/* ---- scanning the training file ------------------------------------------------------------ */

typedef struct {
    const char *path;
    char **labels;
    int num_labels, longest, words, unlabelled;
} Scan;

static void scan_word(void *ctx, const char *word, const char *label, int example, int line) {
    (void)word, (void)example;
    Scan *sc = ctx;
    sc->words++;
    if (!label) {
        sc->unlabelled = line;
        return;
    }
    if (!strcmp(label, CONLL_IGNORED))
        return;
    RP_CHECK(strlen(label) < TAG_LABEL_MAX, "%s:%d: label '%s' is longer than %d bytes (the longest label a tagging "
             "model holds)", sc->path, line, label, TAG_LABEL_MAX - 1);
    for (int i = 0; i < sc->num_labels; i++)
        if (!strcmp(sc->labels[i], label))
            return;
    RP_CHECK(sc->num_labels < TAG_MAX_LABELS, "%s:%d: more than %d distinct labels", sc->path, line, TAG_MAX_LABELS);
    sc->labels[sc->num_labels++] = xstrdup(label);
}

static void scan_end(void *ctx, int example) {
    (void)example;
    Scan *sc = ctx;
    sc->longest = sc->words > sc->longest ? sc->words : sc->longest;
    sc->words = 0;
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void conll_scan(TaskConfig *task, const char *path) {
    Scan sc = {path, xcalloc(TAG_MAX_LABELS, sizeof(char *)), 0, 0, 0, 0};
    ConllVisitor v = {scan_word, scan_end, &sc};
    int examples = conll_walk(path, &v);
    RP_CHECK(!sc.unlabelled, "%s:%d: a word without a label; training data needs 'word label' lines", path,
             sc.unlabelled);
    RP_CHECK(examples > 0 && sc.num_labels > 0, "%s (key 'task.train_file'): expected tagging examples with "
             "labels other than '%s', found %d examples and no label", path, CONLL_IGNORED, examples);
    qsort(sc.labels, (size_t)sc.num_labels, sizeof(char *), compare_strings);
    if (!task->tag_labels[0]) {
        size_t used = 0, room = sizeof task->tag_labels;
        for (int i = 0; i < sc.num_labels; i++) { /* each label as a config word (%XX for ';', '#', '=', ':', '%') */
            if (i)
                task->tag_labels[used++] = ' ';
            used += config_word_encode(task->tag_labels + used, room - used, sc.labels[i]);
            RP_CHECK(used < room, "%s: its %d labels do not fit key 'task.tag_labels' (%zu bytes)", path,
                     sc.num_labels, room - 1);
        }
        rp_log("%s: %d labels: %s", path, sc.num_labels, task->tag_labels);
    }
    if (!task->train_max_length) {
        task->train_max_length = sc.longest;
        rp_log("%s: %d examples, the longest of %d words (task.train_max_length)", path, examples, sc.longest);
    }
    for (int i = 0; i < sc.num_labels; i++)
        free(sc.labels[i]);
    free(sc.labels);
}

/* ---- a vocabulary of the file's words -------------------------------------------------------- */

typedef struct {
    char **words;
    int count, capacity, lower;
    BasicTokenizer *basic; /* reused for every word */
} WordList;

static void collect_word(void *ctx, const char *word, const char *label, int example, int line) {
    (void)label, (void)example, (void)line;
    WordList *w = ctx;
    /* the words the tokenizer's basic step makes of it (train/data/basic_tokenizer.h: cleaning,
     * punctuation split and, with lower, lower-casing and accent stripping), so that every one is a
     * whole WordPiece of the built vocabulary, never [UNK] */
    BasicTokenizer *basic = w->basic;
    basic_init(basic, word, strlen(word), w->lower);
    while (basic_next_word(basic)) {
        if (w->count == w->capacity) {
            w->capacity = w->capacity ? 2 * w->capacity : 1024;
            w->words = realloc(w->words, sizeof(char *) * (size_t)w->capacity);
            RP_CHECK(w->words, "out of memory building a vocabulary");
        }
        w->words[w->count++] = xstrdup(basic->word);
    }
    basic_release(basic);
}

char *conll_vocab(const char *path, int lower) {
    WordList w = {NULL, 0, 0, lower, xmalloc(sizeof(BasicTokenizer))};
    ConllVisitor v = {collect_word, NULL, &w};
    conll_walk(path, &v);
    free(w.basic);
    qsort(w.words, (size_t)w.count, sizeof(char *), compare_strings);
    static const char *const special[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    size_t size = 64;
    for (int i = 0; i < w.count; i++)
        size += strlen(w.words[i]) + 1;
    char *text = xmalloc(size), *end = text;
    for (int i = 0; i < 5; i++)
        end += sprintf(end, "%s\n", special[i]);
    for (int i = 0; i < w.count; i++) {
        int special_word = 0;
        for (int s = 0; s < 5; s++)
            special_word |= !strcmp(w.words[i], special[s]);
        if ((i == 0 || strcmp(w.words[i], w.words[i - 1])) && !special_word)
            end += sprintf(end, "%s\n", w.words[i]);
    }
    for (int i = 0; i < w.count; i++)
        free(w.words[i]);
    free(w.words);
    return text;
}

/* ---- reading into sequences ------------------------------------------------------------------ */

typedef struct {
    TaskFeatures *f;
    TagSet *set;
    const TagLabels *ls;
    const Tokenizer *tok;
    BadExamples bad;
    int capacity, example_start, bad_example, unlabelled_lines, labelled_lines;
    int *ids; /* [L] the example's pieces */
} Loader;

static void load_word(void *ctx, const char *word, const char *label, int example, int line) {
    (void)example;
    Loader *ld = ctx;
    TagSet *set = ld->set;
    if (set->num_words == ld->capacity) {
        ld->capacity = ld->capacity ? 2 * ld->capacity : 4096;
        set->words = realloc(set->words, sizeof(char *) * (size_t)ld->capacity);
        set->labels = realloc(set->labels, sizeof(int) * (size_t)ld->capacity);
        set->position = realloc(set->position, sizeof(int) * (size_t)ld->capacity);
        RP_CHECK(set->words && set->labels && set->position, "out of memory reading %s", ld->bad.path);
    }
    int index = -1;
    if (label && strcmp(label, CONLL_IGNORED)) {
        for (int i = 0; i < ld->ls->count && index < 0; i++)
            if (!strcmp(ld->ls->names[i], label))
                index = i;
        if (index < 0 && !ld->bad_example) {
            bad_example(&ld->bad, "line %d: label '%s' is not in the label set (task.tag_labels: the training "
                        "file's); its example", line, label);
            ld->bad_example = 1;
        }
    }
    ld->labelled_lines += label != NULL;
    ld->unlabelled_lines += label == NULL;
    set->words[set->num_words] = xstrdup(word);
    set->labels[set->num_words] = index;
    set->position[set->num_words] = -1;
    set->num_words++;
}

/* The example's words into one sequence: pieces of each word while they fit L - 2. */
static void load_end(void *ctx, int example) {
    (void)example;
    Loader *ld = ctx;
    TagSet *set = ld->set;
    TaskFeatures *f = ld->f;
    int first = ld->example_start, last = set->num_words, L = f->L, n = 0, full = 0;
    ld->example_start = last;
    if (ld->bad_example) { /* dropped whole */
        for (int w = first; w < last; w++)
            free(set->words[w]);
        set->num_words = first;
        ld->example_start = first;
        ld->bad_example = 0;
        return;
    }
    int pieces[CONLL_MAX_PIECES];
    for (int w = first; w < last; w++) {
        int k = full ? 0 : (int)tokenizer_wordpiece(ld->tok, set->words[w], strlen(set->words[w]), pieces,
                                                    CONLL_MAX_PIECES);
        k = k < CONLL_MAX_PIECES ? k : CONLL_MAX_PIECES;
        if (full || k == 0 || n + k > L - 2) {
            full |= k > 0;
            set->truncated++;
            continue;
        }
        set->position[w] = 1 + n; /* after [CLS] */
        memcpy(ld->ids + n, pieces, sizeof(int) * (size_t)k);
        n += k;
    }
    int i = features_add(f, tokenizer_special(ld->tok), ld->ids, n, NULL, 0, set->num_examples);
    for (int w = first; w < last; w++)
        if (set->position[w] >= 0 && set->labels[w] >= 0)
            f->token_labels[(size_t)i * L + set->position[w]] = set->labels[w];
    set->first_word[++set->num_examples] = last;
}

void conll_load(TaskFeatures *f, TagSet *set, const TagLabels *ls, const char *path, const Tokenizer *tok,
                BadExamplePolicy policy) {
    memset(set, 0, sizeof *set);
    f->per_token = 1;
    Loader ld = {f, set, ls, tok, {policy, path, 0}, 0, 0, 0, 0, 0, NULL};
    ld.ids = xmalloc(sizeof(int) * (size_t)f->L);
    /* first_word grows with the examples: one pass counts them */
    ConllVisitor count = {scan_word, scan_end, &(Scan){path, xcalloc(TAG_MAX_LABELS, sizeof(char *)), 0, 0, 0, 0}};
    Scan *sc = count.ctx;
    int examples = conll_walk(path, &count);
    for (int i = 0; i < sc->num_labels; i++)
        free(sc->labels[i]);
    free(sc->labels);
    set->first_word = xcalloc((size_t)examples + 1, sizeof(int));
    ConllVisitor v = {load_word, load_end, &ld};
    conll_walk(path, &v);
    set->labelled = ld.unlabelled_lines == 0;
    RP_CHECK(!ld.labelled_lines || !ld.unlabelled_lines, "%s: %d lines with a label and %d without: expected "
             "'word label' lines throughout (or words alone, unlabelled)", path, ld.labelled_lines,
             ld.unlabelled_lines);
    bad_examples_summary(&ld.bad);
    if (set->truncated)
        rp_log("%s: %d words beyond task.max_seq_len = %d (or of no WordPiece) are not seen by the model and score "
               "as wrong", path, set->truncated, f->L);
    free(ld.ids);
}

void tag_set_free(TagSet *set) {
    for (int w = 0; w < set->num_words; w++)
        free(set->words[w]);
    free(set->words);
    free(set->labels);
    free(set->position);
    free(set->first_word);
    memset(set, 0, sizeof *set);
}
