/* Training instances: packing and dynamic masking (contract in instances.h). */
#include "train/data/instances.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "train/data/shard.h"

/* Salts that separate the random streams derived from [data] seed. */
#define TRAIN_SALT 0x747261696eULL /* "train": short lengths and masks */
#define EVAL_SALT 0x6576616cULL    /* "eval" */
#define ORDER_SALT 0x6f72646572ULL /* "order": per-epoch document order */

_Static_assert(sizeof(int) == sizeof(int32_t), "rows (int) are copied from shard tokens (int32_t)");

struct InstanceStream {
    const Shard *shard;
    InstanceOptions opt;
    SpecialTokens special;
    int vocab_size;
    unsigned char *is_continuation; /* [vocab_size] "##" piece */
    unsigned char *is_special;      /* [vocab_size] [PAD] [UNK] [CLS] [SEP] [MASK] */
    int64_t *order;                 /* [num_documents] document order of st.epoch */
    int *group_start, *group_len;   /* [max_seq_len] masking candidates of one row */
    int *scratch_ids, *scratch_labels; /* [max_seq_len] a skipped row (whole_word_mask) */
    int64_t cached_doc, cached_first, cached_count; /* the last document's sentences */
    ShardWindow window;             /* sentence offsets read in blocks (lazy shards) */
    InstanceState st;
};

InstanceOptions instance_options(const DataConfig *data, int batch_size, int eval) {
    InstanceOptions o = {
        .batch_size = batch_size,
        .max_seq_len = data->max_seq_len,
        .short_seq_prob = data->short_seq_prob,
        .masked_lm_prob = data->masked_lm_prob,
        .max_predictions_per_seq = data->max_predictions_per_seq,
        .whole_word_mask = data->whole_word_mask,
        .seed = (uint64_t)data->seed,
        .eval = eval,
    };
    return o;
}

InstanceBatch *instance_batch_create(int batch_size, int seq_len) {
    RP_CHECK(batch_size > 0 && seq_len > 0,
             "instance batch: expected a positive shape, got [%d, %d]", batch_size, seq_len);
    InstanceBatch *b = xcalloc(1, sizeof *b);
    size_t n = (size_t)batch_size * (size_t)seq_len;
    b->batch_size = batch_size;
    b->seq_len = seq_len;
    b->input_ids = xcalloc(n, sizeof(int));
    b->token_type_ids = xcalloc(n, sizeof(int));
    b->attention_mask = xcalloc(n, sizeof(int));
    b->labels = xcalloc(n, sizeof(int));
    return b;
}

void instance_batch_free(InstanceBatch *b) {
    if (!b)
        return;
    free(b->input_ids);
    free(b->token_type_ids);
    free(b->attention_mask);
    free(b->labels);
    free(b);
}

void instance_state_pack(const InstanceState *st, uint64_t w[INSTANCE_STATE_WORDS]) {
    for (int i = 0; i < 4; i++)
        w[i] = st->rng.s[i];
    w[4] = st->epoch;
    w[5] = st->order_pos;
    w[6] = st->sentence;
    w[7] = st->token;
    w[8] = st->rows;
    w[9] = st->num_documents;
}

InstanceState instance_state_unpack(const uint64_t w[INSTANCE_STATE_WORDS]) {
    InstanceState st;
    for (int i = 0; i < 4; i++)
        st.rng.s[i] = w[i];
    st.epoch = w[4];
    st.order_pos = w[5];
    st.sentence = w[6];
    st.token = w[7];
    st.rows = w[8];
    st.num_documents = w[9];
    return st;
}

/* The document order of st.epoch: shard order for eval, else a Fisher-Yates shuffle seeded by
 * (seed, epoch) alone, so that any epoch's order can be rebuilt on resume. */
static void build_order(InstanceStream *s) {
    int64_t n = s->shard->num_documents;
    for (int64_t i = 0; i < n; i++)
        s->order[i] = i;
    if (s->opt.eval)
        return;
    Rng rng;
    rng_seed(&rng, hash64(hash64(s->opt.seed ^ ORDER_SALT) ^ s->st.epoch));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&rng, (uint64_t)i + 1), t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
}

void instance_stream_rewind(InstanceStream *s) {
    memset(&s->st, 0, sizeof s->st);
    rng_seed(&s->st.rng, hash64(s->opt.seed ^ (s->opt.eval ? EVAL_SALT : TRAIN_SALT)));
    s->st.num_documents = (uint64_t)s->shard->num_documents;
    build_order(s);
}

InstanceStream *instance_stream_create(const Shard *shard, const Tokenizer *tok,
                                       const InstanceOptions *opt) {
    RP_CHECK(shard->num_documents > 0, "%s: no documents to draw instances from", shard->path);
    int vocab_size = tokenizer_vocab_size(tok);
    RP_CHECK(vocab_size == shard->vocab_size,
             "%s: vocab_size %d does not match the tokenizer's %d: run realpos prepare again",
             shard->path, shard->vocab_size, vocab_size);
    RP_CHECK(opt->max_seq_len >= 5 && opt->batch_size > 0 && opt->max_predictions_per_seq > 0,
             "instances: expected max_seq_len >= 5, batch_size > 0, max_predictions_per_seq > 0, "
             "got %d, "
             "%d, %d",
             opt->max_seq_len, opt->batch_size, opt->max_predictions_per_seq);
    InstanceStream *s = xcalloc(1, sizeof *s);
    s->shard = shard;
    s->opt = *opt;
    s->special = tokenizer_special(tok);
    s->vocab_size = vocab_size;
    s->is_continuation = xcalloc((size_t)vocab_size, 1);
    s->is_special = xcalloc((size_t)vocab_size, 1);
    for (int id = 0; id < vocab_size; id++)
        s->is_continuation[id] = (unsigned char)(tokenizer_is_continuation(tok, id) != 0);
    const SpecialTokens *sp = &s->special;
    int specials[5] = {sp->pad, sp->unk, sp->cls, sp->sep, sp->mask}, num_special = 0;
    for (int i = 0; i < 5; i++) {
        num_special += !s->is_special[specials[i]];
        s->is_special[specials[i]] = 1;
    }
    RP_CHECK(vocab_size > num_special, "%s: the vocabulary has only special tokens", shard->path);
    s->order = xmalloc((size_t)shard->num_documents * sizeof *s->order);
    s->group_start = xmalloc((size_t)opt->max_seq_len * sizeof(int));
    s->group_len = xmalloc((size_t)opt->max_seq_len * sizeof(int));
    s->scratch_ids = xmalloc((size_t)opt->max_seq_len * sizeof(int));
    s->scratch_labels = xmalloc((size_t)opt->max_seq_len * sizeof(int));
    s->cached_doc = -1;
    shard_window_reset(&s->window);
    instance_stream_rewind(s);
    return s;
}

void instance_stream_free(InstanceStream *s) {
    if (!s)
        return;
    free(s->is_continuation);
    free(s->is_special);
    free(s->order);
    free(s->group_start);
    free(s->group_len);
    free(s->scratch_ids);
    free(s->scratch_labels);
    free(s);
}

InstanceState instance_state_get(const InstanceStream *s) { return s->st; }

/* Document doc's sentences [*first, *first + *count) (global indices; the last one cached). */
static void document_span(InstanceStream *s, int64_t doc, int64_t *first, int64_t *count) {
    if (doc != s->cached_doc) {
        shard_document(s->shard, doc, &s->cached_first, &s->cached_count);
        s->cached_doc = doc;
    }
    *first = s->cached_first;
    *count = s->cached_count;
}

/* Tokens of global sentence sent: [*from, *to). */
static int64_t sentence_span(InstanceStream *s, int64_t sent, int64_t *from) {
    int64_t to;
    shard_sentence(s->shard, &s->window, sent, from, &to);
    return to - *from;
}

void instance_state_set(InstanceStream *s, const InstanceState *st) {
    const Shard *sh = s->shard;
    RP_CHECK(st->num_documents == (uint64_t)sh->num_documents,
             "%s: the saved data-stream state is for a shard of %llu documents, this one has %lld: "
             "resume with the shards the run was started with",
             sh->path, (unsigned long long)st->num_documents, (long long)sh->num_documents);
    RP_CHECK(st->order_pos < st->num_documents,
             "%s: saved data-stream state: document position %llu out of range", sh->path,
             (unsigned long long)st->order_pos);
    s->st = *st;
    build_order(s);
    int64_t doc = s->order[st->order_pos], first, num_sent, from;
    document_span(s, doc, &first, &num_sent);
    uint64_t sent_len = st->sentence < (uint64_t)num_sent
                            ? (uint64_t)sentence_span(s, first + (int64_t)st->sentence, &from)
                            : 0;
    RP_CHECK(st->sentence <= (uint64_t)num_sent && (st->token < sent_len || st->token == 0),
             "%s: saved data-stream state: sentence %llu token %llu out of range for document %lld",
             sh->path, (unsigned long long)st->sentence, (unsigned long long)st->token,
             (long long)doc);
}

/* Next document of the epoch order; a new epoch (and order) after the last. */
static void next_document(InstanceStream *s) {
    s->st.sentence = 0;
    s->st.token = 0;
    if (++s->st.order_pos == s->st.num_documents) {
        s->st.order_pos = 0;
        s->st.epoch++;
        build_order(s);
    }
}

/* Pack one row into ids[0, n) as [CLS] content [SEP]; returns n. ids NULL: advance the same
 * way reading only offsets. *seps: the [SEP]s put between documents inside the content. */
static int pack_row(InstanceStream *s, int *ids, int *seps) {
    const Shard *sh = s->shard;
    InstanceState *st = &s->st;
    int max_content = s->opt.max_seq_len - 2, target = max_content;
    if (!s->opt.eval && rng_uniform(&st->rng) < s->opt.short_seq_prob)
        target = 2 + (int)rng_below(&st->rng, (uint64_t)max_content - 1); /* [2, max_content] */
    int *content = ids ? ids + 1 : NULL, n = 0;
    *seps = 0;
    while (n < target) {
        int64_t first, num_sent, from;
        document_span(s, s->order[st->order_pos], &first, &num_sent);
        if ((int64_t)st->sentence == num_sent) { /* document done */
            next_document(s);
            if (n > 0) { /* [SEP] and the next document, if its first sentence fits too */
                document_span(s, s->order[st->order_pos], &first, &num_sent);
                if (n + 1 + sentence_span(s, first, &from) > target)
                    break;
                if (content)
                    content[n] = s->special.sep;
                n++;
                ++*seps;
            }
            continue;
        }
        int64_t left = sentence_span(s, first + (int64_t)st->sentence, &from) - (int64_t)st->token;
        int64_t space = target - n;
        from += (int64_t)st->token;
        if (left <= space) {
            if (content)
                shard_read_tokens(sh, from, left, content + n);
            n += (int)left;
            st->sentence++;
            st->token = 0;
        } else if (n == 0) { /* longer than the row: split */
            if (content)
                shard_read_tokens(sh, from, space, content);
            n = (int)space;
            st->token += (uint64_t)space;
        } else {
            break; /* the sentence starts the next row */
        }
    }
    if (ids) {
        ids[0] = s->special.cls;
        ids[n + 1] = s->special.sep;
    }
    return n + 2;
}

/* Choose and apply the masks of a row whose num_groups candidates (num_tokens tokens) are in
 * group_start/group_len: k, the shuffle, the 80/10/10 draws. The draws depend on the group
 * lengths alone, not on the ids, so ids NULL (a skipped row) leaves the RNG exactly as a real row
 * would. Returns the number of labels set. */
static int choose_masks(InstanceStream *s, int num_groups, int num_tokens, int *ids, int *labels) {
    const SpecialTokens *sp = &s->special;
    Rng *rng = &s->st.rng;
    if (!num_tokens)
        return 0;
    int k = (int)floor((double)num_tokens * (double)s->opt.masked_lm_prob + 0.5);
    k = k < 1 ? 1 : k > s->opt.max_predictions_per_seq ? s->opt.max_predictions_per_seq : k;
    for (int i = num_groups - 1; i > 0; i--) { /* shuffle the candidates */
        int j = (int)rng_below(rng, (uint64_t)i + 1);
        int t0 = s->group_start[i], t1 = s->group_len[i];
        s->group_start[i] = s->group_start[j];
        s->group_len[i] = s->group_len[j];
        s->group_start[j] = t0;
        s->group_len[j] = t1;
    }
    int chosen = 0;
    for (int g = 0; g < num_groups && chosen < k; g++) {
        if (chosen + s->group_len[g] > k)
            continue; /* a word that would exceed the cap is skipped whole */
        for (int i = s->group_start[g]; i < s->group_start[g] + s->group_len[g]; i++) {
            if (labels)
                labels[i] = ids[i];
            float u = rng_uniform(rng);
            if (u < 0.8f) {
                if (ids)
                    ids[i] = sp->mask;
            } else if (u >= 0.9f) {
                int r;
                do
                    r = (int)rng_below(rng, (uint64_t)s->vocab_size);
                while (s->is_special[r]);
                if (ids)
                    ids[i] = r;
            }
        }
        chosen += s->group_len[g];
    }
    return chosen;
}

/* BERT's dynamic masking of ids[0, n) (see instances.h); returns the number of labels set. */
static int mask_row(InstanceStream *s, int *ids, int *labels, int n) {
    const SpecialTokens *sp = &s->special;
    int num_groups = 0, num_tokens = 0, open = 0;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id == sp->cls || id == sp->sep || id == sp->pad) {
            open = 0;
            continue;
        }
        num_tokens++;
        if (s->opt.whole_word_mask && open && s->is_continuation[id]) {
            s->group_len[num_groups - 1]++;
        } else {
            s->group_start[num_groups] = i;
            s->group_len[num_groups++] = 1;
            open = 1;
        }
    }
    return choose_masks(s, num_groups, num_tokens, ids, labels);
}

void instance_stream_skip(InstanceStream *s, int rows) {
    for (int r = 0; r < rows; r++) {
        int seps;
        if (s->opt.whole_word_mask) { /* word boundaries need the ids */
            int n = pack_row(s, s->scratch_ids, &seps);
            mask_row(s, s->scratch_ids, s->scratch_labels, n);
        } else {
            /* Each content token but the inserted [SEP]s is a candidate of its own: the corpus
             * holds no [CLS], [SEP] or [PAD] (the tokenizer never emits them). */
            int n = pack_row(s, NULL, &seps), num_tokens = n - 2 - seps;
            for (int i = 0; i < num_tokens; i++) {
                s->group_start[i] = i;
                s->group_len[i] = 1;
            }
            choose_masks(s, num_tokens, num_tokens, NULL, NULL);
        }
        s->st.rows++;
    }
}

void instance_stream_next(InstanceStream *s, InstanceBatch *b) {
    int L = s->opt.max_seq_len;
    RP_CHECK(b->batch_size == s->opt.batch_size && b->seq_len == L,
             "instances: batch of shape [%d, %d], stream makes [%d, %d]", b->batch_size, b->seq_len,
             s->opt.batch_size, L);
    b->num_predictions = 0;
    b->num_tokens = 0;
    for (int r = 0; r < b->batch_size; r++) {
        int *ids = b->input_ids + (size_t)r * L, *labels = b->labels + (size_t)r * L;
        int *attention = b->attention_mask + (size_t)r * L;
        int *types = b->token_type_ids + (size_t)r * L;
        int seps;
        int n = pack_row(s, ids, &seps);
        for (int l = 0; l < L; l++) {
            labels[l] = IGNORE_LABEL;
            types[l] = 0;
            attention[l] = l < n;
            if (l >= n)
                ids[l] = s->special.pad;
        }
        b->num_predictions += mask_row(s, ids, labels, n);
        b->num_tokens += n;
        s->st.rows++;
    }
}
