/* MLM pretraining as a task of the run (pretrain.h).
 *
 * Batches come from the training instance stream (train/data/instances.h: packing and dynamic
 * masking); dropout masks are a pure function of (model seed, step, micro-batch) and the stream's
 * whole state is saved in each checkpoint, so a resumed run continues bit-identically to an
 * uninterrupted one (same thread count). A checkpoint's task state:
 *   /vocab             the vocabulary text (attribute do_lower_case)
 *   /train/data_state  uint64 [INSTANCE_STATE_WORDS]  the training stream's position and RNG */
#include "train/loop/pretrain.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "train/data/shard_index.h"
#include "train/data/shard_set.h"
#include "train/model/checkpoint.h"
#include "train/model/transfer.h"

int mlm_max_predictions(const Config *cfg) {
    int64_t n = (int64_t)cfg->train.batch_size * cfg->data.max_predictions_per_seq;
    RP_CHECK(n <= INT_MAX, "key 'train.batch_size' (%d) x key 'data.max_predictions_per_seq' (%d): expected "
             "a product of at most %d masked positions per batch, got %lld", cfg->train.batch_size,
             cfg->data.max_predictions_per_seq, INT_MAX, (long long)n);
    return (int)n;
}

void mlm_data_open(MlmData *d, const Config *cfg, char *vocab_text, const char *vocab_origin) {
    const DataConfig *dc = &cfg->data;
    memset(d, 0, sizeof *d);
    d->vocab_text = vocab_text;
    d->tok = tokenizer_for_model(vocab_text, strlen(vocab_text), dc->do_lower_case, vocab_origin,
                                 cfg->model.vocab_size, "model.vocab_size");
    shard_set_open(dc, vocab_text, strlen(vocab_text), vocab_origin, &d->train_shard, &d->eval_shard);
    InstanceOptions train_opt = instance_options(dc, cfg->train.batch_size, 0);
    InstanceOptions eval_opt = instance_options(dc, cfg->train.batch_size, 1);
    d->train_stream = instance_stream_create(d->train_shard, d->tok, &train_opt);
    d->eval_stream = instance_stream_create(d->eval_shard, d->tok, &eval_opt);
    d->batch = instance_batch_create(cfg->train.batch_size, dc->max_seq_len);
    batch_layout_create(&d->layout, cfg->train.batch_size, dc->max_seq_len);
    d->padding = dc->padding;
    d->unigram_token = shard_most_frequent_token(d->train_shard, tokenizer_special(d->tok));
}

void mlm_data_free(MlmData *d) {
    instance_batch_free(d->batch);
    batch_layout_free(&d->layout);
    instance_stream_free(d->train_stream);
    instance_stream_free(d->eval_stream);
    shard_free(d->train_shard);
    shard_free(d->eval_shard);
    tokenizer_free(d->tok);
    free(d->vocab_text);
    memset(d, 0, sizeof *d);
}

/* The stream's batch in data.padding's layout */
static Batch batch_of(MlmData *d) {
    const InstanceBatch *ib = d->batch;
    const Batch padded = {ib->batch_size, ib->seq_len, ib->input_ids, ib->token_type_ids, ib->attention_mask,
                          ib->labels, NULL};
    return batch_relayout(&d->layout, &padded, d->padding);
}

Batch mlm_data_next(MlmData *d) {
    instance_stream_next(d->train_stream, d->batch);
    return batch_of(d);
}

EvalResult evaluate_mlm(const Model *m, Activations *acts, MlmData *data, int num_batches, Dist *dist) {
    instance_stream_rewind(data->eval_stream);
    double loss_sum = 0;
    long correct = 0, predictions = 0, unigram_correct = 0;
    /* A stop signal ends it early (each rank still joins the one reduction below). */
    for (int i = 0; i < num_batches && !stop_signal_received(); i++) {
        instance_stream_next(data->eval_stream, data->batch); /* every rank reads every batch of the one stream */
        if (dist && i % dist->size != dist->rank)
            continue; /* batch i is rank i mod N's */
        Batch b = batch_of(data);
        ForwardStats st = model_mlm_forward(m, acts, &b, FORWARD_EVAL, 0, NULL);
        for (int n = 0; n < batch_rows(&b); n++)
            unigram_correct += b.labels[n] == data->unigram_token;
        loss_sum += (double)st.loss * st.num_predicted;
        correct += st.num_correct;
        predictions += st.num_predicted;
    }
    double sums[5] = {loss_sum, (double)correct, (double)predictions, (double)unigram_correct,
                      stop_signal_received() != 0};
    if (dist)
        dist_sum_doubles(dist, sums, 5);
    loss_sum = sums[0];
    correct = (long)sums[1];
    predictions = (long)sums[2];
    unigram_correct = (long)sums[3];
    EvalResult r = {0, 0, 0, 0, predictions, sums[4] > 0};
    if (predictions) {
        r.unigram_accuracy = (double)unigram_correct / (double)predictions;
        r.loss = loss_sum / (double)predictions;
        r.accuracy = (double)correct / (double)predictions;
        r.perplexity = exp(r.loss);
    }
    return r;
}

/* ---- the task -------------------------------------------------------------------------------- */

typedef struct {
    const Config *cfg;
    MlmData data;
    Model model;
    Activations acts;
} Pretraining;

/* BatchSource: the next rows of the training stream (step and micro-batch follow from the stream's
 * own state, which each checkpoint saves). */
static void next_mlm_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    Pretraining *p = ctx;
    const Batch b = mlm_data_next(&p->data);
    *out = (TrainBatch){b, {0}, p->data.batch->num_tokens};
}

/* Another rank's micro-batch: the stream moves on exactly as next would, reading only sentence
 * offsets (train/data/instances.h), so a rank touches the tokens of its own micro-batches only. */
static void skip_mlm_batch(void *ctx, long step, int micro) {
    (void)step, (void)micro;
    Pretraining *p = ctx;
    instance_stream_skip(p->data.train_stream, p->data.batch->batch_size);
}

static void evaluate(void *ctx, Run *run, int final) {
    (void)final;
    Pretraining *p = ctx;
    EvalResult r = evaluate_mlm(&p->model, &p->acts, &p->data, p->cfg->train.eval_batches, run->dist);
    if (r.stopped || !dist_is_root(run->dist))
        return; /* cut short by a stop signal on some rank: no partial record; the run saves and stops */
    MetricsRecord rec = {.kind = "eval", .step = run->step, .total_steps = p->cfg->train.max_steps,
                         .eval_loss = r.loss, .eval_accuracy = r.accuracy, .eval_perplexity = r.perplexity,
                         .eval_unigram_accuracy = r.unigram_accuracy};
    metrics_write(&run->log, &rec);
}

static void write_state(hid_t file, const void *ctx) {
    const Pretraining *p = ctx;
    checkpoint_write_vocab(file, p->data.vocab_text, p->cfg->data.do_lower_case);
    uint64_t words[INSTANCE_STATE_WORDS];
    InstanceState st = instance_state_get(p->data.train_stream);
    instance_state_pack(&st, words);
    h5_write_uint64s(file, "train/data_state", words, INSTANCE_STATE_WORDS);
}

static void read_state(void *ctx, hid_t file, const char *path) {
    Pretraining *p = ctx;
    uint64_t words[INSTANCE_STATE_WORDS];
    h5_read_uint64s(file, path, "train/data_state", words, INSTANCE_STATE_WORDS);
    InstanceState st = instance_state_unpack(words);
    instance_state_set(p->data.train_stream, &st);
}

/* Weights of an --init checkpoint, as fine-tuning takes them (train/model/transfer.h): every
 * parameter of this config's model loaded by name and shape, the relative tables of a mode the
 * checkpoint lacks added so that the scores stay the checkpoint's, anything else missing freshly
 * initialised, the table written to RUN_DIR/parameters.txt; [model] keys that differ from the checkpoint's are noted. */
static void note_model_key(const KeySpec *key, const char *now, const char *stored, void *ctx) {
    /* keys that decide which parameters there are and their shapes: the table shows the effect */
    static const char *const shaping[] = {"hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size",
                                          "max_position", "type_vocab_size", "absolute_position",
                                          "relative_position", "relative_k", "t5_num_buckets"};
    if (strcmp(key->section, "model"))
        return;
    int shapes = 0;
    for (size_t i = 0; i < sizeof shaping / sizeof *shaping; i++)
        shapes |= !strcmp(key->name, shaping[i]);
    rp_log("note: key 'model.%s' = %s here, %s in %s (%s)", key->name, now, stored, (const char *)ctx,
           shapes ? "the parameters may differ: the table below says what loads" : "it changes no parameter");
}

/* The weights of checkpoint `init` (transfer.h); the table of what happened to each parameter goes
 * to RUN_DIR/parameters.txt (rank 0), and to stderr too with --verbose, as fine-tuning's does. */
static void init_from(Pretraining *p, const char *init, const Run *run, const RunStart *start) {
    CheckpointFile c;
    checkpoint_file_open_as(&c, init, "--init");
    config_each_difference(p->cfg, &c.cfg, note_model_key, c.path);
    model_init_weights(&p->model, (uint64_t)p->cfg->model.seed); /* what the checkpoint does not hold */
    int root = dist_is_root(run->dist);
    char *table = NULL;
    size_t table_size = 0;
    FILE *table_out = root ? open_memstream(&table, &table_size) : NULL;
    RP_CHECK(!root || table_out, "cannot open a memory stream for the parameter table: %s", strerror(errno));
    TransferSummary moved = transfer_load(c.file, c.path, &p->model, "the pretraining model", table_out);
    transfer_note_positions(c.file, c.path, &p->cfg->model, &c.cfg.model, "step 0's outputs", table_out);
    if (root) {
        fclose(table_out);
        char path[CONFIG_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/parameters.txt", run->dir.path);
        write_file(path, table, strlen(table));
        if (start->verbose)
            fputs(table, stderr);
        rp_log("initialised weights from %s: %d loaded, %d grown, %d initialised, %d dropped (%s)", c.path,
               moved.loaded, moved.grown, moved.initialised, moved.dropped, path);
    }
    free(table);
    checkpoint_file_close(&c);
}

/* What the layout saved: the real tokens of the batches this process laid out (training and
 * evaluation) against the rows of the max_length and longest layouts. Read from the batches as they
 * come (a probe at start-up would read shards a lazy set reads later). */
static void report_layout(const MlmData *d) {
    const BatchLayout *l = &d->layout;
    if (!l->real_tokens)
        return;
    rp_log("batch layout %s (data.padding): the batches of this run were %.1f%% padding at max_length, %.1f%% "
           "at longest; %s", padding_kind_name(d->padding), 100 * (1 - (double)l->real_tokens / l->full_tokens),
           100 * (1 - (double)l->real_tokens / l->longest_tokens),
           d->padding == PAD_NONE ? "unpadded, none of it was computed" : "it was computed as padding");
}

int pretrain(const Config *cfg, const char *config_ini, const char *config_path, Dist *dist, const RunStart *start,
             const char *init) {
    /* Inputs first, before anything large is allocated: a config without [data] fails here. */
    if (!start->resume) {
        RP_CHECK(cfg->data.vocab[0], "%s: key 'data.vocab': expected a vocabulary file, got nothing", config_path);
        RP_CHECK(access(cfg->data.vocab, R_OK) == 0, "%s: cannot read the vocabulary (key 'data.vocab' of %s)",
                 cfg->data.vocab, config_path);
        shard_index_require_current(&cfg->data); /* a corpus edited since prepare */
    }
    Run run;
    run_begin(&run, cfg, config_path, dist, start);
    run_check_resume(&run);
    Pretraining p = {.cfg = cfg};
    model_create(&p.model, &cfg->model, heads_mlm());
    if (run.resume) {
        int lower;
        char *vocab = checkpoint_read_vocab(run.resume->file, run.resume_path, &lower);
        RP_CHECK(vocab, "%s: no /vocab to resume with", run.resume_path);
        RP_CHECK(lower == cfg->data.do_lower_case, "%s: its /vocab has do_lower_case = %d, its config %d", run.resume_path,
                 lower, cfg->data.do_lower_case);
        mlm_data_open(&p.data, cfg, vocab, run.resume_path);
    } else {
        if (init)
            init_from(&p, init, &run, start);
        else
            model_init_weights(&p.model, (uint64_t)cfg->model.seed);
        mlm_data_open(&p.data, cfg, read_file(cfg->data.vocab, NULL, "vocabulary ([data] vocab)"), cfg->data.vocab);
    }
    activations_create(&p.acts, &p.model, cfg->train.batch_size, cfg->data.max_seq_len, mlm_max_predictions(cfg),
                       cfg->train.precision); /* resume: the bf16 weights refreshed after the load */
    const TrainConfig *tc = &cfg->train;
    char *data_identity = shard_index_identity(&cfg->data);
    RunTask task = {
        .name = "pretraining",
        .source = {next_mlm_batch, skip_mlm_batch, &p},
        .head = loss_head_mlm(&p.acts),
        .schedule = {tc->schedule, cfg->optim.lr, config_warmup_steps(cfg), tc->max_steps, tc->grad_accum_steps,
                     tc->clip_grad_norm, (uint64_t)cfg->model.seed, tc->log_interval, NULL},
        .eval_interval = tc->eval_interval,
        .save_final = 1,
        .data_identity = data_identity,
        .ctx = &p,
        .evaluate = evaluate,
        .write_state = write_state,
        .read_state = read_state,
    };
    int rc = run_train(&run, config_ini, &p.model, &task);
    if (dist_is_root(dist))
        report_layout(&p.data);
    free(data_identity);
    run_end(&run);
    activations_free(&p.acts);
    model_free(&p.model);
    mlm_data_free(&p.data);
    return rc;
}
