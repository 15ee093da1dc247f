/* Dynamic masking (train/data/instances.h) on a synthetic shard: exact per-row counts, the fraction
 * masked, 80/10/10, no special token, the cap and whole-word masking. */
#include <math.h>

#include "tests/check.h"
#include "tests/synthetic_shard.h"

typedef struct {
    long rows, bad_count_rows, bad_position, tokens, labels, as_mask, as_same, as_random,
        random_special;
    long word_split, multi_piece_words_masked, max_row_labels, bad_totals;
    long replaced_by[256];
} MaskStats;

static MaskStats run_masking(const Tokenizer *tok, const Vocab *v, const Shard *sh,
                             InstanceOptions o, int steps) {
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
                if (lab[l] == IGNORE_LABEL)
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
                int end = l + 1, masked = lab[l] != IGNORE_LABEL;
                while (end < n - 1 && row[end] != v->sp.sep &&
                       tokenizer_is_continuation(tok, row[end]) && row[l] != v->sp.sep)
                    masked += lab[end++] != IGNORE_LABEL;
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
    CHECK(t, ms.bad_count_rows == 0,
          "masking: every one of %ld rows predicts exactly min(cap, max(1, "
          "round(0.15 n))) tokens",
          ms.rows);
    double frac = (double)ms.labels / ms.tokens;
    CHECK(t, fabs(frac - 0.15) < 0.01,
          "masking: %.4f of %ld candidate tokens predicted, expected 0.15", frac, ms.tokens);
    CHECK(t, ms.bad_position == 0, "masking: never [CLS], [SEP], [PAD] or outside the row");
    double pm = (double)ms.as_mask / ms.labels, ps = (double)ms.as_same / ms.labels,
           pr = (double)ms.as_random / ms.labels;
    CHECK(t, fabs(pm - 0.8) < 0.01 && fabs(ps - 0.1) < 0.01 && fabs(pr - 0.1) < 0.01,
          "masking: %.4f [MASK], %.4f unchanged, %.4f random of %ld predictions (80/10/10)", pm, ps,
          pr, ms.labels);
    int unused = 0;
    for (int id = 0; id < v->vocab_size; id++)
        unused += !is_special(v, id) && ms.replaced_by[id] == 0;
    CHECK(t, ms.random_special == 0 && unused == 0,
          "masking: random replacements cover every non-special id "
          "(%d never drawn) and no special one (%ld)",
          unused, ms.random_special);
    CHECK(t, ms.bad_totals == 0, "masking: batch num_predictions and num_tokens match the rows");
    CHECK(t, ms.word_split > 0,
          "masking without whole_word_mask splits %ld words (the check below can fail)",
          ms.word_split);

    o.max_predictions_per_seq = 4;
    ms = run_masking(tok, v, sh, o, 100);
    CHECK(t, ms.bad_count_rows == 0 && ms.max_row_labels == 4,
          "max_predictions_per_seq 4: at most 4 per row, "
          "exactly the capped count in all %ld rows",
          ms.rows);

    o.max_predictions_per_seq = 64;
    o.whole_word_mask = 1;
    ms = run_masking(tok, v, sh, o, 300);
    CHECK(t, ms.word_split == 0 && ms.multi_piece_words_masked > 1000,
          "whole_word_mask: %ld multi-piece words "
          "masked whole, none split",
          ms.multi_piece_words_masked);
    frac = (double)ms.labels / ms.tokens;
    CHECK(t, ms.bad_count_rows == 0 && fabs(frac - 0.15) < 0.015,
          "whole_word_mask: at most k per row, "
          "%.4f of tokens predicted",
          frac);
}

int main(void) {
    TestTally t = {0, 0};
    Tokenizer *tok = tokenizer_load(VOCAB, 1);
    Vocab v = vocab_info(tok);
    Shard *sh = synthetic_shard(&v, 99);
    test_masking(&t, tok, &v, sh);
    shard_free(sh);
    tokenizer_free(tok);
    return tally_exit(&t);
}
