/* Instance stream (train/instances.h) on synthetic shards built in memory over the fixture
 * vocabulary: packing rules (followed token by token through the shard), short rows, masking
 * counts and 80/10/10 statistics, the cap, whole-word masking, eval determinism, exact resume
 * and the rejection of a foreign state. */
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/common.h"
#include "../core/rng.h"
#include "../train/instances.h"
#include "../train/tokenizer.h"
#include "check.h"

#define VOCAB "tests/fixtures/corpus/vocab.txt"
#define NUM_DOCS 12
#define MAX_L 64

typedef struct {
    SpecialTokens sp;
    int vocab_size;
    int words[64], num_words; /* plain ids; words[0, NUM_DOCS) only ever start a document */
    int pieces[16], num_pieces;
} Vocab;

static int is_special(const Vocab *v, int id) {
    return id == v->sp.pad || id == v->sp.unk || id == v->sp.cls || id == v->sp.sep || id == v->sp.mask;
}

static Vocab vocab_info(const Tokenizer *tok) {
    Vocab v = {.sp = tokenizer_special(tok), .vocab_size = tokenizer_vocab_size(tok)};
    for (int id = 0; id < v.vocab_size; id++) {
        if (is_special(&v, id))
            continue;
        if (tokenizer_is_continuation(tok, id))
            v.pieces[v.num_pieces++] = id;
        else
            v.words[v.num_words++] = id;
    }
    return v;
}

static Shard *new_shard(int64_t max_tokens, int64_t max_sentences, int64_t num_docs, int vocab_size) {
    Shard *s = xcalloc(1, sizeof *s);
    strcpy(s->path, "synthetic");
    s->tokens = xmalloc((size_t)max_tokens * sizeof *s->tokens);
    s->sentence_offsets = xmalloc((size_t)(max_sentences + 1) * sizeof(int64_t));
    s->document_offsets = xmalloc((size_t)(num_docs + 1) * sizeof(int64_t));
    s->num_documents = num_docs;
    s->vocab_size = vocab_size;
    s->sources = xstrdup("synthetic");
    return s;
}

/* NUM_DOCS documents of 1-8 sentences; a sentence has 1-20 tokens, or 40-100 one time in ten
 * (longer than a row of 32); 30% "##" pieces after a sentence's first token. Document d starts
 * with words[d], which occurs nowhere else. */
static Shard *synthetic_shard(const Vocab *v, uint64_t seed) {
    Shard *s = new_shard(NUM_DOCS * 8 * 100, NUM_DOCS * 8, NUM_DOCS, v->vocab_size);
    Rng rng;
    rng_seed(&rng, seed);
    int64_t t = 0, n = 0;
    for (int d = 0; d < NUM_DOCS; d++) {
        s->document_offsets[d] = n;
        int num_sentences = 1 + (int)rng_below(&rng, 8);
        for (int j = 0; j < num_sentences; j++) {
            s->sentence_offsets[n++] = t;
            int len = rng_below(&rng, 10) == 0 ? 40 + (int)rng_below(&rng, 61) : 1 + (int)rng_below(&rng, 20);
            for (int i = 0; i < len; i++) {
                if (j == 0 && i == 0)
                    s->tokens[t++] = v->words[d];
                else if (i > 0 && rng_uniform(&rng) < 0.3f)
                    s->tokens[t++] = v->pieces[rng_below(&rng, (uint64_t)v->num_pieces)];
                else
                    s->tokens[t++] = v->words[NUM_DOCS + rng_below(&rng, (uint64_t)(v->num_words - NUM_DOCS))];
            }
        }
    }
    s->sentence_offsets[n] = t;
    s->document_offsets[NUM_DOCS] = n;
    s->num_tokens = t;
    s->num_sentences = n;
    return s;
}

/* One document of `count` one-token sentences: every row fills its target exactly. */
static Shard *one_token_sentences(const Vocab *v, int64_t count) {
    Shard *s = new_shard(count, count, 1, v->vocab_size);
    for (int64_t i = 0; i <= count; i++)
        s->sentence_offsets[i] = i;
    for (int64_t i = 0; i < count; i++)
        s->tokens[i] = v->words[NUM_DOCS + i % (v->num_words - NUM_DOCS)];
    s->document_offsets[0] = 0;
    s->document_offsets[1] = count;
    s->num_tokens = s->num_sentences = count;
    return s;
}

/* Row r as it was before masking (labels where set, inputs elsewhere); returns its length. */
static int original_row(const InstanceBatch *b, int r, int *out) {
    int n = 0;
    for (int l = 0; l < b->seq_len; l++) {
        int i = r * b->seq_len + l;
        out[l] = b->labels[i] != LABEL_IGNORE ? b->labels[i] : b->input_ids[i];
        n += b->attention_mask[i];
    }
    return n;
}

/* ---- packing: follow every row's content through the shard ------------------------------------ */

typedef struct {
    const Shard *sh;
    const Vocab *v;
    int eval;               /* documents in shard order (else identified by their first token) */
    int64_t doc, sent, tok; /* next token of the stream; doc = -1 before the first row */
    int64_t visits[4096];   /* documents in the order they started */
    int num_visits, split_rows;
} Walker;

static int64_t sentence_len(const Shard *sh, int64_t doc, int64_t sent) {
    int64_t s = sh->document_offsets[doc] + sent;
    return sh->sentence_offsets[s + 1] - sh->sentence_offsets[s];
}

static int doc_done(const Walker *w) {
    return w->doc < 0 || w->sent == w->sh->document_offsets[w->doc + 1] - w->sh->document_offsets[w->doc];
}

/* 1 if row[0, n) = [CLS] content [SEP] continues the stream by the packing rules; full_target
 * (eval) also checks that rows are filled greedily to max_seq_len - 2. */
static int walk_row(Walker *w, const int *row, int n, int full_target) {
    const Shard *sh = w->sh;
    const int *c = row + 1;
    int m = n - 2, touched = 0;
    if (m < 1 || row[0] != w->v->sp.cls || row[n - 1] != w->v->sp.sep || c[m - 1] == w->v->sp.sep)
        return 0;
    for (int i = 0; i < m; i++) {
        if (c[i] == w->v->sp.sep) { /* only between documents */
            if (i == 0 || c[i - 1] == w->v->sp.sep || !doc_done(w))
                return 0;
            continue;
        }
        if (doc_done(w)) { /* a new document: at the row start or after a [SEP] */
            if (i > 0 && c[i - 1] != w->v->sp.sep)
                return 0;
            int64_t next = w->eval ? (w->doc + 1) % sh->num_documents : -1;
            for (int d = 0; !w->eval && d < NUM_DOCS; d++)
                if (c[i] == w->v->words[d])
                    next = d;
            if (next < 0)
                return 0;
            w->doc = next;
            w->sent = w->tok = 0;
            if (w->num_visits < 4096)
                w->visits[w->num_visits++] = next;
        }
        int64_t at = sh->sentence_offsets[sh->document_offsets[w->doc] + w->sent] + w->tok;
        if (c[i] != sh->tokens[at])
            return 0;
        touched += i == 0 || w->tok == 0;
        if (++w->tok == sentence_len(sh, w->doc, w->sent)) {
            w->sent++;
            w->tok = 0;
        }
    }
    if (w->tok != 0) { /* ends inside a sentence: the row holds only (a piece of) that sentence */
        w->split_rows++;
        if (touched != 1 || (full_target && m != full_target))
            return 0;
    } else if (full_target && m < full_target) { /* the next sentence must not have fitted */
        int64_t need = doc_done(w) ? 1 + sentence_len(sh, (w->doc + 1) % sh->num_documents, 0)
                                   : sentence_len(sh, w->doc, w->sent);
        if (m + need <= full_target)
            return 0;
    }
    return 1;
}

static InstanceOptions options(int batch_size, int seq_len, int eval) {
    InstanceOptions o = {.batch_size = batch_size, .max_seq_len = seq_len, .short_seq_prob = 0.1f,
                         .masked_lm_prob = 0.15f, .max_predictions_per_seq = seq_len,
                         .whole_word_mask = 0, .seed = 1234, .eval = eval};
    return o;
}

static void test_packing(TestTally *t, const Tokenizer *tok, const Vocab *v, const Shard *sh, int eval) {
    InstanceOptions o = options(4, 32, eval);
    o.short_seq_prob = eval ? 0.5f : 0.1f; /* eval ignores it */
    InstanceStream *s = instance_stream_create(sh, tok, &o);
    InstanceBatch *b = instance_batch_create(4, 32);
    Walker w = {.sh = sh, .v = v, .eval = eval, .doc = -1};
    int bad = 0, bad_layout = 0, rows = 0, row[MAX_L];
    for (int step = 0; step < 120; step++) {
        instance_stream_next(s, b);
        for (int r = 0; r < 4; r++, rows++) {
            int n = original_row(b, r, row);
            for (int l = 0; l < 32; l++)
                bad_layout += b->attention_mask[r * 32 + l] != (l < n) || b->token_type_ids[r * 32 + l] != 0 ||
                              (l >= n && (row[l] != v->sp.pad || b->labels[r * 32 + l] != LABEL_IGNORE));
            bad += !walk_row(&w, row, n, eval ? 30 : 0);
        }
    }
    const char *mode = eval ? "eval" : "train";
    CHECK(t, bad == 0, "%s packing: %d of %d rows are [CLS] consecutive sentences (docs split by [SEP]) [SEP] "
          "%s", mode, rows - bad, rows, eval ? "filled greedily to max_seq_len" : "in order");
    CHECK(t, bad_layout == 0, "%s packing: attention mask = length prefix, [PAD] after, type ids 0", mode);
    CHECK(t, w.split_rows > 0, "%s packing: %d rows split a sentence longer than the row", mode, w.split_rows);
    int epochs = w.num_visits / NUM_DOCS, order_ok = epochs >= 3, differs = 0, shuffled = 0;
    for (int e = 0; e < epochs; e++) {
        int seen[NUM_DOCS] = {0};
        for (int i = 0; i < NUM_DOCS; i++) {
            int64_t d = w.visits[e * NUM_DOCS + i];
            order_ok &= !seen[d]++ && (!eval || d == i);
            shuffled |= d != i;
            differs |= e > 0 && d != w.visits[i];
        }
    }
    if (eval)
        CHECK(t, order_ok, "eval packing: %d epochs, each visiting the documents in shard order", epochs);
    else
        CHECK(t, order_ok && shuffled && differs, "train packing: %d epochs, each a permutation of the %d "
              "documents, shuffled and different per epoch", epochs, NUM_DOCS);
    instance_batch_free(b);
    instance_stream_free(s);
}

/* short_seq_prob: with one-token sentences a row is shorter than max_seq_len - 2 exactly when its
 * target was drawn short (or, rarely, at the wrap of an epoch). */
static void test_short_rows(TestTally *t, const Tokenizer *tok, const Vocab *v) {
    Shard *sh = one_token_sentences(v, 20000);
    float probs[3] = {0.3f, 0.0f, 0.3f};
    for (int k = 0; k < 3; k++) {
        InstanceOptions o = options(8, 32, k == 2);
        o.short_seq_prob = probs[k];
        InstanceStream *s = instance_stream_create(sh, tok, &o);
        InstanceBatch *b = instance_batch_create(8, 32);
        int rows = 0, short_rows = 0, min_len = 1 << 30, max_len = 0;
        double short_len = 0;
        for (int step = 0; step < 400; step++) {
            instance_stream_next(s, b);
            for (int r = 0; r < 8; r++, rows++) {
                int n = 0;
                for (int l = 0; l < 32; l++)
                    n += b->attention_mask[r * 32 + l];
                short_rows += n - 2 < 30;
                short_len += n - 2 < 30 ? n - 2 : 0;
                min_len = n - 2 < min_len ? n - 2 : min_len;
                max_len = n - 2 < 30 && n - 2 > max_len ? n - 2 : max_len;
            }
        }
        int epochs = (int)instance_state_get(s).epoch;
        double frac = (double)short_rows / rows, expect = probs[k] * 28.0 / 29.0;
        if (k == 0) {
            CHECK(t, fabs(frac - expect) < 0.03, "short_seq_prob 0.3: %.4f of rows short, expected %.4f", frac,
                  expect);
            double mean = short_len / short_rows;
            CHECK(t, fabs(mean - 15.5) < 1.0 && min_len == 2 && max_len == 29, "short rows: content lengths "
                  "in [%d, %d], mean %.2f, expected uniform in [2, 29], mean 15.5", min_len, max_len, mean);
        } else {
            CHECK(t, short_rows <= epochs, "short_seq_prob %s: %d short rows in %d (at most one per epoch "
                  "wrap, %d)", k == 1 ? "0" : "0.3 in eval mode", short_rows, rows, epochs);
        }
        instance_batch_free(b);
        instance_stream_free(s);
    }
    shard_free(sh);
}

/* ---- masking ------------------------------------------------------------------------------------ */

typedef struct {
    long rows, bad_count_rows, bad_position, tokens, labels, as_mask, as_same, as_random, random_special;
    long word_split, multi_piece_words_masked, max_row_labels, bad_totals;
    long replaced_by[256];
} MaskStats;

static MaskStats run_masking(const Tokenizer *tok, const Vocab *v, const Shard *sh, InstanceOptions o, int steps) {
    MaskStats ms = {0};
    InstanceStream *s = instance_stream_create(sh, tok, &o);
    InstanceBatch *b = instance_batch_create(o.batch_size, o.max_seq_len);
    int L = o.max_seq_len, row[MAX_L];
    for (int step = 0; step < steps; step++) {
        instance_stream_next(s, b);
        long batch_labels = 0, batch_tokens = 0;
        for (int r = 0; r < o.batch_size; r++, ms.rows++) {
            const int *in = b->input_ids + r * L, *lab = b->labels + r * L;
            int n = original_row(b, r, row), candidates = 0, count = 0;
            batch_tokens += n;
            for (int l = 0; l < L; l++) {
                int special = row[l] == v->sp.cls || row[l] == v->sp.sep || row[l] == v->sp.pad;
                candidates += l < n && !special;
                if (lab[l] == LABEL_IGNORE)
                    continue;
                count++;
                ms.bad_position += special || l == 0 || l >= n - 1;
                ms.as_mask += in[l] == v->sp.mask;
                ms.as_same += in[l] == lab[l];
                if (in[l] != v->sp.mask && in[l] != lab[l]) {
                    ms.as_random++;
                    ms.random_special += is_special(v, in[l]);
                    ms.replaced_by[in[l] & 255]++;
                }
            }
            /* whole words: a token and the "##" pieces after it, as the stream defines them */
            for (int l = 1; l < n - 1;) {
                int end = l + 1, masked = lab[l] != LABEL_IGNORE;
                while (end < n - 1 && row[end] != v->sp.sep && tokenizer_is_continuation(tok, row[end]) &&
                       row[l] != v->sp.sep)
                    masked += lab[end++] != LABEL_IGNORE;
                ms.word_split += masked != 0 && masked != end - l;
                ms.multi_piece_words_masked += masked == end - l && end - l > 1;
                l = end;
            }
            long k = (long)floor(candidates * (double)o.masked_lm_prob + 0.5);
            k = k < 1 ? 1 : k > o.max_predictions_per_seq ? o.max_predictions_per_seq : k;
            ms.bad_count_rows += o.whole_word_mask ? count > k : count != k;
            ms.max_row_labels = count > ms.max_row_labels ? count : ms.max_row_labels;
            ms.tokens += candidates;
            ms.labels += count;
            batch_labels += count;
        }
        ms.bad_totals += batch_labels != b->num_predictions || batch_tokens != b->num_tokens;
    }
    instance_batch_free(b);
    instance_stream_free(s);
    return ms;
}

static void test_masking(TestTally *t, const Tokenizer *tok, const Vocab *v, const Shard *sh) {
    InstanceOptions o = options(16, 64, 0);
    MaskStats ms = run_masking(tok, v, sh, o, 300);
    CHECK(t, ms.bad_count_rows == 0, "masking: every one of %ld rows predicts exactly min(cap, max(1, "
          "round(0.15 n))) tokens", ms.rows);
    double frac = (double)ms.labels / ms.tokens;
    CHECK(t, fabs(frac - 0.15) < 0.01, "masking: %.4f of %ld candidate tokens predicted, expected 0.15", frac,
          ms.tokens);
    CHECK(t, ms.bad_position == 0, "masking: never [CLS], [SEP], [PAD] or outside the row");
    double pm = (double)ms.as_mask / ms.labels, ps = (double)ms.as_same / ms.labels,
           pr = (double)ms.as_random / ms.labels;
    CHECK(t, fabs(pm - 0.8) < 0.01 && fabs(ps - 0.1) < 0.01 && fabs(pr - 0.1) < 0.01,
          "masking: %.4f [MASK], %.4f unchanged, %.4f random of %ld predictions (80/10/10)", pm, ps, pr, ms.labels);
    int unused = 0;
    for (int id = 0; id < v->vocab_size; id++)
        unused += !is_special(v, id) && ms.replaced_by[id] == 0;
    CHECK(t, ms.random_special == 0 && unused == 0, "masking: random replacements cover every non-special id "
          "(%d never drawn) and no special one (%ld)", unused, ms.random_special);
    CHECK(t, ms.bad_totals == 0, "masking: batch num_predictions and num_tokens match the rows");
    CHECK(t, ms.word_split > 0, "masking without whole_word_mask splits %ld words (the check below can fail)",
          ms.word_split);

    o.max_predictions_per_seq = 4;
    ms = run_masking(tok, v, sh, o, 100);
    CHECK(t, ms.bad_count_rows == 0 && ms.max_row_labels == 4, "max_predictions_per_seq 4: at most 4 per row, "
          "exactly the capped count in all %ld rows", ms.rows);

    o.max_predictions_per_seq = 64;
    o.whole_word_mask = 1;
    ms = run_masking(tok, v, sh, o, 300);
    CHECK(t, ms.word_split == 0 && ms.multi_piece_words_masked > 1000, "whole_word_mask: %ld multi-piece words "
          "masked whole, none split", ms.multi_piece_words_masked);
    frac = (double)ms.labels / ms.tokens;
    CHECK(t, ms.bad_count_rows == 0 && fabs(frac - 0.15) < 0.015, "whole_word_mask: at most k per row, "
          "%.4f of tokens predicted", frac);
}

/* ---- determinism and resume --------------------------------------------------------------------- */

static void copy_batch(const InstanceBatch *b, int *out) {
    size_t n = (size_t)b->batch_size * b->seq_len;
    memcpy(out, b->input_ids, n * sizeof(int));
    memcpy(out + n, b->labels, n * sizeof(int));
    memcpy(out + 2 * n, b->attention_mask, n * sizeof(int));
}

static void test_eval_determinism(TestTally *t, const Tokenizer *tok, const Shard *sh) {
    InstanceOptions o = options(4, 32, 1);
    InstanceStream *s = instance_stream_create(sh, tok, &o);
    InstanceBatch *b = instance_batch_create(4, 32);
    enum { STEPS = 15, WORDS = 3 * 4 * 32 };
    int *first = xmalloc(STEPS * WORDS * sizeof(int)), *again = xmalloc(STEPS * WORDS * sizeof(int));
    for (int i = 0; i < STEPS; i++) {
        instance_stream_next(s, b);
        copy_batch(b, first + i * WORDS);
    }
    instance_stream_rewind(s);
    for (int i = 0; i < STEPS; i++) {
        instance_stream_next(s, b);
        copy_batch(b, again + i * WORDS);
    }
    CHECK(t, !memcmp(first, again, STEPS * WORDS * sizeof(int)), "eval: after rewind, the same %d batches "
          "(rows and masks) again", STEPS);
    free(first);
    free(again);
    instance_batch_free(b);
    instance_stream_free(s);
}

static void test_resume(TestTally *t, const Tokenizer *tok, const Shard *sh) {
    InstanceOptions o = options(4, 32, 0);
    o.short_seq_prob = 0.2f;
    o.whole_word_mask = 1;
    enum { BEFORE = 13, AFTER = 20, WORDS = 3 * 4 * 32 };
    InstanceStream *a = instance_stream_create(sh, tok, &o), *b = instance_stream_create(sh, tok, &o);
    InstanceBatch *batch = instance_batch_create(4, 32);
    for (int i = 0; i < BEFORE; i++)
        instance_stream_next(a, batch);
    uint64_t saved[INSTANCE_STATE_WORDS], end_a[INSTANCE_STATE_WORDS], end_b[INSTANCE_STATE_WORDS];
    InstanceState st = instance_state_get(a);
    instance_state_pack(&st, saved);
    int *uninterrupted = xmalloc(AFTER * WORDS * sizeof(int)), *resumed = xmalloc(AFTER * WORDS * sizeof(int));
    for (int i = 0; i < AFTER; i++) {
        instance_stream_next(a, batch);
        copy_batch(batch, uninterrupted + i * WORDS);
    }
    st = instance_state_unpack(saved);
    instance_state_set(b, &st);
    for (int i = 0; i < AFTER; i++) {
        instance_stream_next(b, batch);
        copy_batch(batch, resumed + i * WORDS);
    }
    st = instance_state_get(a);
    instance_state_pack(&st, end_a);
    st = instance_state_get(b);
    instance_state_pack(&st, end_b);
    CHECK(t, !memcmp(uninterrupted, resumed, AFTER * WORDS * sizeof(int)) && !memcmp(end_a, end_b, sizeof end_a),
          "resume: a stream restored from the state after %d batches gives the next %d batches bit for bit "
          "(epoch %llu -> %llu)", BEFORE, AFTER, (unsigned long long)saved[4], (unsigned long long)end_a[4]);
    free(uninterrupted);
    free(resumed);
    instance_batch_free(batch);
    instance_stream_free(a);
    instance_stream_free(b);
}

/* A state from another shard (or out of range) is refused with exit status 1. */
static void test_bad_state(TestTally *t, const Tokenizer *tok, const Shard *sh) {
    InstanceOptions o = options(4, 32, 0);
    InstanceStream *s = instance_stream_create(sh, tok, &o);
    for (int k = 0; k < 2; k++) {
        InstanceState st = instance_state_get(s);
        if (k == 0)
            st.num_documents++;
        else
            st.order_pos = st.num_documents;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            instance_state_set(s, &st);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(t, WIFEXITED(status) && WEXITSTATUS(status) == 1, "resume: a state with %s is refused (exit 1)",
              k == 0 ? "another document count" : "a document position out of range");
    }
    instance_stream_free(s);
}

int main(void) {
    TestTally t = {0, 0};
    Tokenizer *tok = tokenizer_load(VOCAB, 1);
    Vocab v = vocab_info(tok);
    Shard *sh = synthetic_shard(&v, 99);
    test_packing(&t, tok, &v, sh, 1);
    test_packing(&t, tok, &v, sh, 0);
    test_short_rows(&t, tok, &v);
    test_masking(&t, tok, &v, sh);
    test_eval_determinism(&t, tok, sh);
    test_resume(&t, tok, sh);
    test_bad_state(&t, tok, sh);
    shard_free(sh);
    tokenizer_free(tok);
    return tally_exit(&t);
}
