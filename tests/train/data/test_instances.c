/* Instance stream (train/data/instances.h) on synthetic shards: packing rules (followed token by
 * token through the shard), short rows, eval determinism, exact resume and the rejection of a
 * foreign state. Masking statistics are in tests/train/data/test_masking.c. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/synthetic_shard.h"

/* ---- packing: follow every row's content through the shard ----------------------------------- */

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
    return w->doc < 0 ||
           w->sent == w->sh->document_offsets[w->doc + 1] - w->sh->document_offsets[w->doc];
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

static void test_packing(TestTally *t, const Tokenizer *tok, const Vocab *v, const Shard *sh,
                         int eval) {
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
                bad_layout +=
                    b->attention_mask[r * 32 + l] != (l < n) ||
                    b->token_type_ids[r * 32 + l] != 0 ||
                    (l >= n && (row[l] != v->sp.pad || b->labels[r * 32 + l] != IGNORE_LABEL));
            bad += !walk_row(&w, row, n, eval ? 30 : 0);
        }
    }
    const char *mode = eval ? "eval" : "train";
    CHECK(t, bad == 0,
          "%s packing: %d of %d rows are [CLS] consecutive sentences (docs split by [SEP]) [SEP] "
          "%s",
          mode, rows - bad, rows, eval ? "filled greedily to max_seq_len" : "in order");
    CHECK(t, bad_layout == 0, "%s packing: attention mask = length prefix, [PAD] after, type ids 0",
          mode);
    CHECK(t, w.split_rows > 0, "%s packing: %d rows split a sentence longer than the row", mode,
          w.split_rows);
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
        CHECK(t, order_ok, "eval packing: %d epochs, each visiting the documents in shard order",
              epochs);
    else
        CHECK(t, order_ok && shuffled && differs,
              "train packing: %d epochs, each a permutation of the %d "
              "documents, shuffled and different per epoch",
              epochs, NUM_DOCS);
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
            CHECK(t, fabs(frac - expect) < 0.03,
                  "short_seq_prob 0.3: %.4f of rows short, expected %.4f", frac, expect);
            double mean = short_len / short_rows;
            CHECK(t, fabs(mean - 15.5) < 1.0 && min_len == 2 && max_len == 29,
                  "short rows: content lengths "
                  "in [%d, %d], mean %.2f, expected uniform in [2, 29], mean 15.5",
                  min_len, max_len, mean);
        } else {
            CHECK(t, short_rows <= epochs,
                  "short_seq_prob %s: %d short rows in %d (at most one per epoch "
                  "wrap, %d)",
                  k == 1 ? "0" : "0.3 in eval mode", short_rows, rows, epochs);
        }
        instance_batch_free(b);
        instance_stream_free(s);
    }
    shard_free(sh);
}
/* ---- determinism and resume ------------------------------------------------------------------ */

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
    int *first = xmalloc(STEPS * WORDS * sizeof(int)),
        *again = xmalloc(STEPS * WORDS * sizeof(int));
    for (int i = 0; i < STEPS; i++) {
        instance_stream_next(s, b);
        copy_batch(b, first + i * WORDS);
    }
    instance_stream_rewind(s);
    for (int i = 0; i < STEPS; i++) {
        instance_stream_next(s, b);
        copy_batch(b, again + i * WORDS);
    }
    CHECK(t, !memcmp(first, again, STEPS * WORDS * sizeof(int)),
          "eval: after rewind, the same %d batches "
          "(rows and masks) again",
          STEPS);
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
    InstanceStream *a = instance_stream_create(sh, tok, &o),
                   *b = instance_stream_create(sh, tok, &o);
    InstanceBatch *batch = instance_batch_create(4, 32);
    for (int i = 0; i < BEFORE; i++)
        instance_stream_next(a, batch);
    uint64_t saved[INSTANCE_STATE_WORDS], end_a[INSTANCE_STATE_WORDS], end_b[INSTANCE_STATE_WORDS];
    InstanceState st = instance_state_get(a);
    instance_state_pack(&st, saved);
    int *uninterrupted = xmalloc(AFTER * WORDS * sizeof(int)),
        *resumed = xmalloc(AFTER * WORDS * sizeof(int));
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
    CHECK(t,
          !memcmp(uninterrupted, resumed, AFTER * WORDS * sizeof(int)) &&
              !memcmp(end_a, end_b, sizeof end_a),
          "resume: a stream restored from the state after %d batches gives the next %d batches bit "
          "for bit "
          "(epoch %llu -> %llu)",
          BEFORE, AFTER, (unsigned long long)saved[4], (unsigned long long)end_a[4]);
    free(uninterrupted);
    free(resumed);
    instance_batch_free(batch);
    instance_stream_free(a);
    instance_stream_free(b);
}

/* instance_stream_skip as another MPI rank's micro-batches: a stream that skips every other
 * batch makes the same batches as one that reads them all, and its state (RNG included) equals
 * the reading stream's after every batch. Without whole_word_mask the skipping stream runs on a
 * copy of the shard without its tokens array (NULL: any token read would crash), so skipping
 * reads offsets alone. */
static void test_skip(TestTally *t, const Tokenizer *tok, const Shard *sh, int whole_word) {
    InstanceOptions o = options(4, 32, 0);
    o.short_seq_prob = 0.2f;
    o.whole_word_mask = whole_word;
    enum { BATCHES = 60, WORDS = 3 * 4 * 32 };
    Shard blind = *sh; /* same offsets; tokens removed while skipping */
    InstanceStream *all = instance_stream_create(sh, tok, &o), *some = instance_stream_create(&blind, tok, &o);
    InstanceBatch *a = instance_batch_create(4, 32), *b = instance_batch_create(4, 32);
    int same_batches = 1, same_states = 1;
    for (int i = 0; i < BATCHES; i++) {
        instance_stream_next(all, a);
        if (i % 2) {
            blind.tokens = whole_word ? sh->tokens : NULL;
            instance_stream_skip(some, 4);
            blind.tokens = sh->tokens;
        } else {
            instance_stream_next(some, b);
            int wa[WORDS], wb[WORDS];
            copy_batch(a, wa);
            copy_batch(b, wb);
            same_batches &= !memcmp(wa, wb, sizeof wa);
        }
        uint64_t sa[INSTANCE_STATE_WORDS], sb[INSTANCE_STATE_WORDS];
        InstanceState st = instance_state_get(all);
        instance_state_pack(&st, sa);
        st = instance_state_get(some);
        instance_state_pack(&st, sb);
        same_states &= !memcmp(sa, sb, sizeof sa);
    }
    InstanceState end = instance_state_get(all);
    CHECK(t, same_batches && same_states,
          "skip%s: skipping every other batch%s leaves the same state (RNG, position) and the same "
          "batches as reading all %d (epoch %llu)",
          whole_word ? " (whole_word_mask)" : "", whole_word ? "" : " without reading a token",
          BATCHES, (unsigned long long)end.epoch);
    instance_batch_free(a);
    instance_batch_free(b);
    instance_stream_free(all);
    instance_stream_free(some);
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
        CHECK(t, WIFEXITED(status) && WEXITSTATUS(status) == 1,
              "resume: a state with %s is refused (exit 1)",
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
    test_eval_determinism(&t, tok, sh);
    test_resume(&t, tok, sh);
    test_skip(&t, tok, sh, 0);
    test_skip(&t, tok, sh, 1);
    test_bad_state(&t, tok, sh);
    shard_free(sh);
    tokenizer_free(tok);
    return tally_exit(&t);
}
