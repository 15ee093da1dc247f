/* Corpus preparation and shards (train/data/corpus_prepare.h, shard.h, shard_set.h): MD5 vectors, the round trip prepare ->
 * load on the fixtures, the held-out fraction, determinism for a seed, dropped empty sentences and
 * documents, and the refusal of foreign vocabularies and malformed shards. Failures of
 * `realpos prepare` on bad input are in tests/train/data/test_corpus.sh. */
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "train/config/config.h"
#include "core/io/h5io.h"
#include "core/io/files.h"
#include "train/data/corpus_prepare.h"
#include "train/data/md5.h"
#include "train/data/shard.h"
#include "train/data/shard_set.h"
#include "train/data/tokenizer.h"
#include "tests/check.h"

#define FIXTURES "tests/fixtures/corpus"
#define MAX_DOCS 256

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    RP_CHECK(f, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = xmalloc((size_t)n + 1);
    RP_CHECK(fread(text, 1, (size_t)n, f) == (size_t)n, "%s: short read", path);
    fclose(f);
    text[n] = '\0';
    *len = (size_t)n;
    return text;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    RP_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "%s: cannot write", path);
}

/* Exit status of fn(arg) run in a child process (stderr silenced). */
static int child_status(void (*fn)(const void *), const void *arg) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        fn(arg);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_md5(TestTally *t) {
    static const struct {
        size_t len;
        char fill;
        const char *hex;
    } cases[] = {
        {0, 0, "d41d8cd98f00b204e9800998ecf8427e"},
        {3, 0, "900150983cd24fb0d6963f7d28e17f72"},
        {43, 0, "9e107d9d372bb6826bd81d3542a419d6"},
        {55, 'a', "ef1772b6dff9a122358552954ad0df65"},
        {56, 'a', "3b0c8ac703f828b04c6c197006d17218"},
        {64, 'a', "014842d480b571495a4a0363793f7367"},
        {1027, 0, "e2301d76c2219cb28dfe5f06cb60d53d"},
    };
    char data[1100], hex[33];
    int ok = 1;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].fill)
            memset(data, cases[c].fill, cases[c].len);
        else if (cases[c].len == 1027) /* bytes 0..255 four times, then "xyz" */
            for (int i = 0; i < 1027; i++)
                data[i] = i < 1024 ? (char)(i % 256) : "xyz"[i - 1024];
        else
            memcpy(data, cases[c].len == 3 ? "abc" : "The quick brown fox jumps over the lazy dog",
                   cases[c].len);
        md5_hex(data, cases[c].len, hex);
        ok &= !strcmp(hex, cases[c].hex);
    }
    CHECK(t, ok, "md5: RFC 1321 vectors and block-boundary lengths 55, 56, 64, 1027 match md5sum");
}

/* ---- expected documents, tokenized line by line ---------------------------------------------- */

typedef struct {
    int ids[512], num_ids;
    int sentence_end[64], num_sentences;
} Doc;

/* Documents of the files as corpus_prepare.h defines them: non-blank lines, a blank line or the end of a
 * file ends a document; lines without tokens are dropped, then documents without sentences. */
static int expected_docs(const Tokenizer *tok, const char *const *files, int num_files, Doc *docs) {
    int n = 0;
    for (int f = 0; f < num_files; f++) {
        size_t len;
        char *text = slurp(files[f], &len);
        int open = 0; /* docs[n - 1] takes the next sentence */
        for (char *line = text; line < text + len;) {
            char *end = strchr(line, '\n');
            end = end ? end : text + len;
            *end = '\0';
            if (strspn(line, " \t\r") == strlen(line)) {
                open = 0;
            } else {
                if (!open) { /* a new document, reusing the slot of one left without sentences */
                    n += n == 0 || docs[n - 1].num_sentences;
                    memset(&docs[n - 1], 0, sizeof(Doc));
                    open = 1;
                }
                Doc *d = &docs[n - 1];
                size_t got = tokenizer_encode(tok, line, strlen(line), d->ids + d->num_ids,
                                              512 - (size_t)d->num_ids);
                if (got) {
                    d->num_ids += (int)got;
                    d->sentence_end[d->num_sentences++] = d->num_ids;
                }
            }
            line = end + 1;
        }
        free(text);
        n -= n && !docs[n - 1].num_sentences;
    }
    return n;
}

/* 1 if shard document d holds exactly the sentences of doc. */
static int same_doc(const Shard *s, int64_t d, const Doc *doc) {
    int64_t first = s->document_offsets[d], count = s->document_offsets[d + 1] - first;
    if (count != doc->num_sentences)
        return 0;
    for (int64_t j = 0; j < count; j++) {
        int64_t from = s->sentence_offsets[first + j], to = s->sentence_offsets[first + j + 1];
        int start = j ? doc->sentence_end[j - 1] : 0;
        if (to - from != doc->sentence_end[j] - start ||
            memcmp(s->tokens + from, doc->ids + start, (size_t)(to - from) * sizeof(int)))
            return 0;
    }
    return 1;
}

static DataConfig data_config(const char *shard_dir, float eval_fraction, int64_t seed) {
    Config cfg;
    config_defaults(&cfg);
    DataConfig d = cfg.data;
    strcpy(d.vocab, FIXTURES "/vocab.txt");
    strcpy(d.shard_dir, shard_dir);
    d.eval_fraction = eval_fraction;
    d.seed = seed;
    d.do_lower_case = 1;
    return d;
}

/* An in-memory copy of a lazily opened split, read through the accessors of shard_set.h. */
static Shard *materialize(const Shard *lazy) {
    Shard *m = xcalloc(1, sizeof *m);
    memcpy(m->path, lazy->path, sizeof m->path);
    m->num_tokens = lazy->num_tokens;
    m->num_sentences = lazy->num_sentences;
    m->num_documents = lazy->num_documents;
    m->vocab_size = lazy->vocab_size;
    m->do_lower_case = lazy->do_lower_case;
    memcpy(m->vocab_md5, lazy->vocab_md5, 33);
    m->sources = xstrdup(lazy->sources);
    m->tokens = xmalloc((size_t)(m->num_tokens + 1) * sizeof *m->tokens);
    m->sentence_offsets = xmalloc((size_t)(m->num_sentences + 1) * sizeof(int64_t));
    m->document_offsets = xmalloc((size_t)(m->num_documents + 1) * sizeof(int64_t));
    static ShardWindow w;
    shard_window_reset(&w);
    int64_t t = 0, s = 0;
    for (int64_t d = 0; d < m->num_documents; d++) {
        int64_t first, count;
        shard_document(lazy, d, &first, &count);
        m->document_offsets[d] = s;
        for (int64_t j = 0; j < count; j++) {
            int64_t from, to;
            shard_sentence(lazy, &w, first + j, &from, &to);
            shard_read_tokens(lazy, from, to - from, m->tokens + t);
            m->sentence_offsets[s++] = t;
            t += to - from;
        }
    }
    m->document_offsets[m->num_documents] = s;
    m->sentence_offsets[s] = t;
    RP_CHECK(t == m->num_tokens && s == m->num_sentences, "%s: counts differ from the reads", m->path);
    return m;
}

/* Both splits of the set d prepared (in d->shard_dir), opened lazily with the fixture vocabulary
 * and d's settings (the set's own: shard_set_open refuses others), copied to memory. */
static void open_splits(const DataConfig *d, Shard **train, Shard **eval) {
    size_t len;
    char *vocab = slurp(FIXTURES "/vocab.txt", &len);
    Shard *lazy[2];
    shard_set_open(d, vocab, len, "the fixture vocabulary", &lazy[0], &lazy[1]);
    *train = materialize(lazy[0]);
    *eval = materialize(lazy[1]);
    shard_free(lazy[0]);
    shard_free(lazy[1]);
    free(vocab);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void bad_vocab_text(const void *arg) {
    const Shard *s = arg;
    shard_check_vocab(s, "[PAD]\n", 6, 1, "another vocabulary");
}
static void bad_lower_case(const void *arg) {
    const Shard *s = arg;
    size_t len;
    char *text = slurp(FIXTURES "/vocab.txt", &len);
    shard_check_vocab(s, text, len, 0, "the fixture vocabulary, cased");
}
static void load_shard(const void *arg) { shard_free(shard_load(arg)); }

static void test_round_trip(TestTally *t, const Tokenizer *tok, const char *tmp) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/fixtures", tmp);
    DataConfig d = data_config(dir, 0.3f, 7);
    const char *files[2] = {FIXTURES "/docs_a.txt", FIXTURES "/docs_b.txt"};
    d.num_corpus = 2;
    strcpy(d.corpus[0], files[0]);
    strcpy(d.corpus[1], files[1]);
    PrepareReport r = corpus_prepare(&d, 0, 1);
    static Doc docs[MAX_DOCS];
    int num_docs = expected_docs(tok, files, 2, docs);
    Shard *split[2];
    open_splits(&d, &split[0], &split[1]);
    int where[MAX_DOCS], in_order = 1;
    for (int e = 0; e < num_docs; e++)
        where[e] = -1;
    for (int k = 0; k < 2; k++) {
        int last = -1;
        for (int64_t i = 0; i < split[k]->num_documents; i++)
            for (int e = 0; e < num_docs; e++)
                if (same_doc(split[k], i, &docs[e])) {
                    in_order &= e > last && where[e] == -1;
                    where[e] = k;
                    last = e;
                }
    }
    int placed = 0, held_out = 0;
    for (int e = 0; e < num_docs; e++) {
        placed += where[e] >= 0;
        held_out += where[e] == 1;
    }
    CHECK(t,
          num_docs == 6 && placed == 6 && in_order &&
              split[0]->num_documents + split[1]->num_documents == 6,
          "round trip: each of the %d fixture documents is in exactly one shard, sentence for "
          "sentence, in "
          "corpus order",
          num_docs);
    CHECK(t, held_out >= 1 && held_out < 6 && held_out == r.eval.documents,
          "round trip: %d of 6 documents held out, as the report says", held_out);
    CHECK(t,
          r.train.tokens == split[0]->num_tokens && r.eval.sentences == split[1]->num_sentences &&
              r.train.documents == split[0]->num_documents,
          "round trip: report counts match the shards");
    size_t len;
    char *vocab = slurp(FIXTURES "/vocab.txt", &len), md5[33];
    md5_hex(vocab, len, md5);
    CHECK(t,
          !strcmp(split[0]->vocab_md5, md5) && split[0]->vocab_size == 56 &&
              split[0]->do_lower_case,
          "round trip: the index's vocab_md5, vocab_size, do_lower_case");
    shard_check_vocab(split[0], vocab, len, 1, "the fixture vocabulary");
    CHECK(t,
          child_status(bad_vocab_text, split[0]) == 1 &&
              child_status(bad_lower_case, split[0]) == 1,
          "shard_check_vocab: the same vocabulary passes; another text or do_lower_case exits 1");
    CHECK(t, count_entries(dir) == 5,
          "round trip: shard_dir holds index.json and a shard and a manifest per source, no "
          "temporary file (%d entries)", count_entries(dir));
    free(vocab);
    shard_free(split[0]);
    shard_free(split[1]);
}

/* 200 one-sentence documents "w[i/100] w[i/10%10] w[i%10] ." plus lines that tokenize to nothing.
 */
static const char *const generated_words[10] = {"whale", "ship", "sea",   "sail",  "captain",
                                                "god",   "lord", "earth", "light", "day"};

static void write_generated(const char *path) {
    const char *const *w = generated_words;
    size_t cap = 1 << 16, used = 0;
    char *text = xcalloc(cap, 1);
    for (int i = 0; i < 200; i++)
        used += (size_t)snprintf(text + used, cap - used, "%s %s %s .\n%s\n", w[i / 100],
                                 w[i / 10 % 10], w[i % 10], i == 0 ? "\x01\x02\n" : "");
    snprintf(text + used, cap - used, "\x01\n\x02\x03\n");
    write_text(path, text);
    free(text);
}

static void test_split(TestTally *t, const Tokenizer *tok, const char *tmp) {
    char corpus[256], dirs[3][256];
    snprintf(corpus, sizeof corpus, "%s/generated.txt", tmp);
    write_generated(corpus);
    int64_t seeds[3] = {11, 11, 12};
    PrepareReport r[3];
    Shard *train[3], *eval[3];
    for (int k = 0; k < 3; k++) {
        snprintf(dirs[k], sizeof dirs[k], "%s/generated_%d", tmp, k);
        DataConfig d = data_config(dirs[k], 0.1f, seeds[k]);
        d.num_corpus = 1;
        strcpy(d.corpus[0], corpus);
        r[k] = corpus_prepare(&d, 0, 1);
        open_splits(&d, &train[k], &eval[k]);
    }
    /* every generated document, identified by its three words, is in exactly one of the shards */
    int seen[200] = {0}, word_id[10], covered = 0;
    for (int i = 0; i < 10; i++)
        word_id[i] = tokenizer_lookup(tok, generated_words[i]);
    for (int k = 0; k < 2; k++) {
        const Shard *s = k ? eval[0] : train[0];
        for (int64_t d = 0; d < s->num_documents; d++) {
            const int32_t *ids = s->tokens + s->sentence_offsets[s->document_offsets[d]];
            int index = 0;
            for (int j = 0; j < 3; j++) {
                int digit = 0;
                while (digit < 9 && word_id[digit] != ids[j])
                    digit++;
                index = 10 * index + digit;
            }
            covered += index < 200 && !seen[index]++;
        }
    }
    CHECK(t, covered == 200,
          "split: train and eval together hold each of the 200 documents once (%d)", covered);
    CHECK(t,
          r[0].eval.documents >= 10 && r[0].eval.documents <= 30 &&
              r[0].train.documents + r[0].eval.documents == 200 && r[0].dropped_sentences == 3,
          "split: %lld of 200 documents held out (eval_fraction 0.1: each with probability 0.1), 3 "
          "token-less lines and their document dropped", (long long)r[0].eval.documents);
    int same =
        train[0]->num_tokens == train[1]->num_tokens &&
        eval[0]->num_tokens == eval[1]->num_tokens &&
        !memcmp(train[0]->tokens, train[1]->tokens, (size_t)train[0]->num_tokens * sizeof(int)) &&
        !memcmp(eval[0]->tokens, eval[1]->tokens, (size_t)eval[0]->num_tokens * sizeof(int));
    CHECK(t, same, "split: the same seed gives the same shards");
    CHECK(t,
          eval[2]->num_tokens != eval[0]->num_tokens ||
              memcmp(eval[0]->tokens, eval[2]->tokens, (size_t)eval[0]->num_tokens * sizeof(int)),
          "split: another seed holds out other documents");
    for (int k = 0; k < 3; k++) {
        shard_free(train[k]);
        shard_free(eval[k]);
    }
}

/* A 5-token shard of one document; `format` and the sentence offsets are the parameters. */
static void write_small_shard(const char *path, const char *format, const int64_t sentences[4]) {
    int32_t tokens[5] = {5, 6, 7, 8, 9};
    int64_t documents[2] = {0, 3};
    hsize_t n_tok = 5, n_sent = 4, n_doc = 2;
    hid_t f = h5_create(path);
    h5_write_ints(f, "tokens", tokens, 1, &n_tok);
    h5_write_int64s(f, "sentence_offsets", sentences, 1, &n_sent);
    h5_write_int64s(f, "document_offsets", documents, 1, &n_doc);
    h5_attr_write_string(f, "format", format);
    h5_attr_write_int64(f, "vocab_size", 56);
    h5_attr_write_int64(f, "do_lower_case", 1);
    h5_attr_write_string(f, "vocab_md5", "0123456789abcdef0123456789abcdef");
    h5_attr_write_string(f, "sources", "none");
    h5_close(f, path);
}

/* shard_load accepts a well-formed small shard and refuses the same with another format or with
 * an empty sentence. */
static void test_malformed(TestTally *t, const char *tmp) {
    char good[256], other_format[256], empty_sentence[256];
    snprintf(good, sizeof good, "%s/good.h5", tmp);
    snprintf(other_format, sizeof other_format, "%s/other_format.h5", tmp);
    snprintf(empty_sentence, sizeof empty_sentence, "%s/empty_sentence.h5", tmp);
    const int64_t fine[4] = {0, 2, 3, 5}, with_empty[4] = {0, 3, 3, 5};
    write_small_shard(good, SHARD_FORMAT, fine);
    write_small_shard(other_format, "other-format-1", fine);
    write_small_shard(empty_sentence, SHARD_FORMAT, with_empty);
    CHECK(t,
          child_status(load_shard, good) == 0 && child_status(load_shard, other_format) == 1 &&
              child_status(load_shard, empty_sentence) == 1,
          "shard_load: a well-formed shard loads; another format or an empty sentence exits 1");
}

/* An old-format pair (train.h5, eval.h5 of realpos-shard-1) in a shard_dir without index.json
 * still opens through shard_set_open, loaded whole. */
static void test_old_format(TestTally *t, const char *tmp) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/old", tmp);
    mkdir_p(dir);
    size_t len;
    char *vocab = slurp(FIXTURES "/vocab.txt", &len), md5[33];
    md5_hex(vocab, len, md5);
    const char *splits[2] = {"train", "eval"};
    for (int k = 0; k < 2; k++) {
        int32_t tokens[5] = {5, 6, 7, 8, 9};
        int64_t sentences[3] = {0, 2, 5}, documents[2] = {0, 2};
        hsize_t n_tok = 5, n_sent = 3, n_doc = 2;
        snprintf(path, sizeof path, "%s/%s.h5", dir, splits[k]);
        hid_t f = h5_create(path);
        h5_write_ints(f, "tokens", tokens, 1, &n_tok);
        h5_write_int64s(f, "sentence_offsets", sentences, 1, &n_sent);
        h5_write_int64s(f, "document_offsets", documents, 1, &n_doc);
        h5_attr_write_string(f, "format", SHARD_FORMAT);
        h5_attr_write_int64(f, "vocab_size", 56);
        h5_attr_write_int64(f, "do_lower_case", 1);
        h5_attr_write_string(f, "vocab_md5", md5);
        h5_attr_write_string(f, "sources", "old");
        h5_close(f, path);
    }
    Shard *train, *eval;
    DataConfig d = data_config(dir, 0.02f, 12345);
    open_splits(&d, &train, &eval);
    CHECK(t, train->num_documents == 1 && eval->num_sentences == 2 && train->tokens[4] == 9,
          "old format: train.h5 and eval.h5 without index.json still load (one document each)");
    shard_free(train);
    shard_free(eval);
    free(vocab);
}

int main(void) {
    TestTally t = {0, 0};
    char tmp[] = "/tmp/rp_test_corpus_XXXXXX";
    RP_CHECK(mkdtemp(tmp), "cannot create a temporary directory");
    Tokenizer *tok = tokenizer_load(FIXTURES "/vocab.txt", 1);
    test_md5(&t);
    test_round_trip(&t, tok, tmp);
    test_split(&t, tok, tmp);
    test_old_format(&t, tmp);
    test_malformed(&t, tmp);
    tokenizer_free(tok);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    RP_CHECK(system(cmd) == 0, "cannot remove %s", tmp);
    return tally_exit(&t);
}
