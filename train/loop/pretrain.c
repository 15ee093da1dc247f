/* The MLM pretraining loop (pretrain.h).
 *
 * A step (the shared train_step, step.h): grad_accum_steps micro-batches (forward, backward with
 * loss scale 1/accum), global gradient-norm clipping, the scheduled learning rate, one AdamW
 * update. Dropout masks are a pure function of (model seed, step, micro-batch) and the data
 * stream's whole state is saved in each checkpoint, so a resumed run continues bit-identically to
 * an uninterrupted one (same thread count). */
#include "train/loop/pretrain.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/h5io.h"
#include "core/rng.h"
#include "train/data/shard_set.h"
#include "train/loop/run_dir.h"
#include "train/loop/step.h"
#include "train/model/checkpoint.h"

/* /vocab and /train (step, data stream state) of a pretraining checkpoint. */
static void write_training_state(hid_t file, const void *ctx) {
    const Trainer *t = ctx;
    checkpoint_write_vocab(file, t->vocab_text, t->cfg.data.do_lower_case);
    uint64_t words[INSTANCE_STATE_WORDS];
    InstanceState st = instance_state_get(t->train_stream);
    instance_state_pack(&st, words);
    h5_write_uint64s(file, "train/data_state", words, INSTANCE_STATE_WORDS);
    int64_t step = t->step;
    hsize_t one = 1;
    h5_write_int64s(file, "train/step", &step, 1, &one);
}

/* Every rank calls (ZeRO-1 moments are gathered on rank 0 through the gradient block, free
 * between steps); rank 0 writes. */
static void save_checkpoint(Trainer *t) {
    AdamW full = dp_adamw_full(&t->opt, t->model.grads);
    dp_adamw_gather(&t->opt, &full);
    if (dist_is_root(&t->dist)) {
        CheckpointExtras extras = {t->config_ini, &full, write_training_state, t};
        run_dir_save_checkpoint(t->cfg.train.run_dir, t->step, t->cfg.train.keep_last, &t->model, &extras);
    }
    dp_adamw_release(&t->opt);
}

EvalResult evaluate_mlm(const Model *m, Activations *acts, InstanceStream *eval_stream,
                        InstanceBatch *batch, int num_batches, int unigram_token, Dist *dist) {
    instance_stream_rewind(eval_stream);
    double loss_sum = 0;
    long correct = 0, predictions = 0, unigram_correct = 0;
    /* A stop signal ends it early (each rank still joins the one reduction below). */
    for (int i = 0; i < num_batches && !stop_signal_received(); i++) {
        instance_stream_next(eval_stream, batch); /* every rank reads every batch of the one stream */
        if (dist && i % dist->size != dist->rank)
            continue; /* batch i is rank i mod N's */
        Batch b = {batch->batch_size, batch->seq_len, batch->input_ids, batch->token_type_ids,
                   batch->attention_mask, batch->labels};
        ForwardStats st = model_forward(m, acts, &b, 0, 0, NULL);
        for (int n = 0; n < b.B * b.L; n++)
            unigram_correct += b.labels[n] == unigram_token;
        loss_sum += (double)st.loss * st.num_predicted;
        correct += st.num_correct;
        predictions += st.num_predicted;
    }
    if (dist) {
        double sums[4] = {loss_sum, (double)correct, (double)predictions, (double)unigram_correct};
        dist_sum_doubles(dist, sums, 4);
        loss_sum = sums[0];
        correct = (long)sums[1];
        predictions = (long)sums[2];
        unigram_correct = (long)sums[3];
    }
    EvalResult r = {0, 0, 0, 0, predictions};
    if (predictions) {
        r.unigram_accuracy = (double)unigram_correct / (double)predictions;
        r.loss = loss_sum / (double)predictions;
        r.accuracy = (double)correct / (double)predictions;
        r.perplexity = exp(r.loss);
    }
    return r;
}

/* Fatal unless the checkpoint's [model] equals the configuration's; names the first key that
 * differs (compared through the canonical INI text, so every key is covered). */
static void require_same_model(const Config *stored, const Config *cfg, const char *ckpt) {
    Config a = *cfg, b = *stored;
    a.optim = b.optim;
    a.train = b.train;
    a.data = b.data;
    char *text_a = config_to_ini(&a), *text_b = config_to_ini(&b);
    const char *la = text_a, *lb = text_b;
    while (*la && *lb) {
        size_t na = strcspn(la, "\n"), nb = strcspn(lb, "\n");
        RP_CHECK(na == nb && !memcmp(la, lb, na),
                 "%s: the checkpoint's model differs from the configuration's: checkpoint has '%.*s', the "
                 "configuration '%.*s'; a checkpoint can only continue the same model",
                 ckpt, (int)nb, lb, (int)na, la);
        la += na + (la[na] == '\n');
        lb += nb + (lb[nb] == '\n');
    }
    free(text_a);
    free(text_b);
}

int trainer_max_predictions(const Config *cfg) {
    int64_t n = (int64_t)cfg->train.batch_size * cfg->data.max_predictions_per_seq;
    RP_CHECK(n <= INT_MAX, "key 'train.batch_size' (%d) x key 'data.max_predictions_per_seq' (%d): expected "
             "a product of at most %d masked positions per batch, got %lld", cfg->train.batch_size,
             cfg->data.max_predictions_per_seq, INT_MAX, (long long)n);
    return (int)n;
}

void trainer_open_data(Trainer *t, const char *vocab_origin) {
    const DataConfig *d = &t->cfg.data;
    t->tok = tokenizer_from_text(t->vocab_text, strlen(t->vocab_text), d->do_lower_case, vocab_origin);
    RP_CHECK(tokenizer_vocab_size(t->tok) == t->cfg.model.vocab_size,
             "%s: the vocabulary has %d tokens but model.vocab_size = %d", vocab_origin,
             tokenizer_vocab_size(t->tok), t->cfg.model.vocab_size);
    shard_set_open(d, t->vocab_text, strlen(t->vocab_text), vocab_origin, &t->train_shard, &t->eval_shard);
    InstanceOptions train_opt = instance_options(d, t->cfg.train.batch_size, 0);
    InstanceOptions eval_opt = instance_options(d, t->cfg.train.batch_size, 1);
    t->train_stream = instance_stream_create(t->train_shard, t->tok, &train_opt);
    t->eval_stream = instance_stream_create(t->eval_shard, t->tok, &eval_opt);
    t->batch = instance_batch_create(t->cfg.train.batch_size, d->max_seq_len);
    t->unigram_token = shard_most_frequent_token(t->train_shard, tokenizer_special(t->tok));
}

void trainer_free(Trainer *t) {
    activations_free(&t->acts);
    dp_adamw_free(&t->opt);
    model_free(&t->model);
    instance_batch_free(t->batch);
    instance_stream_free(t->train_stream);
    instance_stream_free(t->eval_stream);
    shard_free(t->train_shard);
    shard_free(t->eval_shard);
    tokenizer_free(t->tok);
    free(t->vocab_text);
    free(t->config_ini);
}

static void log_eval(Trainer *t) {
    EvalResult r = evaluate_mlm(&t->model, &t->acts, t->eval_stream, t->batch, t->cfg.train.eval_batches,
                                t->unigram_token, &t->dist);
    if (stop_signal_received())
        return; /* cut short by SIGINT/SIGTERM: no partial record; the loop saves and stops */
    if (!dist_is_root(&t->dist))
        return;
    MetricsRecord rec = {.kind = "eval", .step = t->step, .total_steps = t->cfg.train.max_steps,
                         .eval_loss = r.loss, .eval_accuracy = r.accuracy, .eval_perplexity = r.perplexity};
    metrics_write(&t->log, &rec);
}

/* BatchSource of pretraining: the next rows of the training stream (step and micro-batch follow
 * from the stream's own state, which each checkpoint saves). */
static void next_mlm_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    Trainer *t = ctx;
    InstanceBatch *ib = t->batch;
    instance_stream_next(t->train_stream, ib);
    *out = (TrainBatch){{ib->batch_size, ib->seq_len, ib->input_ids, ib->token_type_ids, ib->attention_mask,
                         ib->labels}, {0}, ib->num_tokens};
}

/* Run steps until max_steps or a stop signal; returns 0 on a clean finish or stop. */
static int train_loop(Trainer *t) {
    const TrainConfig *tc = &t->cfg.train;
    StepConfig sc = {tc->schedule, t->cfg.optim.lr, tc->warmup_steps, tc->max_steps, tc->grad_accum_steps,
                     tc->clip_grad_norm, (uint64_t)t->cfg.model.seed, tc->log_interval, tc->run_dir};
    TrainStep ts;
    train_step_init(&ts, &sc, &t->model, NULL, &t->cfg.optim, loss_head_mlm(&t->acts),
                    (BatchSource){next_mlm_batch, t}, dist_is_root(&t->dist) ? &t->log : NULL, t->step);
    ts.dp = &t->opt;
    rp_log("training steps %ld..%d, %d rank%s x %d threads, sgemm peak %.0f GFLOP/s", t->step, tc->max_steps,
           t->dist.size, t->dist.size > 1 ? "s" : "", omp_get_max_threads(), ts.peak_flops * 1e-9);
    if (tc->grad_accum_steps % t->dist.size)
        rp_log("note: train.grad_accum_steps = %d is not a multiple of the %d ranks: some ranks idle each step",
               tc->grad_accum_steps, t->dist.size);
    long first_step = t->step;
    while (t->step < tc->max_steps && !ts.stop) {
        train_step(&ts, t->step);
        t->step++;
        if (t->step % tc->eval_interval == 0 && t->step < tc->max_steps)
            log_eval(t);
        if (t->step % tc->checkpoint_interval == 0 && t->step < tc->max_steps && !ts.stop)
            save_checkpoint(t);
    }
    train_step_log_communication(&ts, t->step - first_step);
    if (ts.stop) { /* a signal reached some rank: every rank leaves after the same step */
        if (stop_signal_received())
            rp_log("signal %d: saving a checkpoint at step %ld and stopping", stop_signal_received(), t->step);
        else
            rp_log("a stop signal on another rank: saving a checkpoint at step %ld and stopping", t->step);
        save_checkpoint(t);
        return 0;
    }
    log_eval(t);
    save_checkpoint(t);
    return 0;
}

void pretrain_setup(Trainer *t, const char *config_path, const char *resume, const char *init) {
    /* Inputs first, before anything large is allocated: a config without [data] fails here. */
    if (!resume) {
        RP_CHECK(t->cfg.data.vocab[0], "%s: key 'data.vocab': expected a vocabulary file, got nothing", config_path);
        RP_CHECK(access(t->cfg.data.vocab, R_OK) == 0, "%s: cannot read the vocabulary (key 'data.vocab' of %s)",
                 t->cfg.data.vocab, config_path);
    }
    model_create(&t->model, &t->cfg.model, heads_mlm());
    dp_adamw_create(&t->opt, &t->dist, &t->model.table, t->cfg.train.shard_optimizer);
    const char *vocab_origin = t->cfg.data.vocab;
    const char *from = resume ? resume : init;
    if (from) {
        char *stored_ini;
        hid_t f = checkpoint_open(from, &stored_ini);
        Config stored;
        config_load_string(&stored, stored_ini, from);
        require_same_model(&stored, &t->cfg, from);
        checkpoint_load_model(f, from, &t->model);
        if (resume) {
            AdamW full = dp_adamw_full(&t->opt, t->model.grads); /* every rank reads, keeps its shard */
            RP_CHECK(checkpoint_load_optimizer(f, from, &t->model, &full), "%s: no optimizer state to resume from",
                     from);
            dp_adamw_scatter(&t->opt, &full);
            dp_adamw_release(&t->opt);
            int lower;
            t->vocab_text = checkpoint_read_vocab(f, from, &lower);
            RP_CHECK(t->vocab_text, "%s: no /vocab to resume with", from);
            vocab_origin = from;
            uint64_t words[INSTANCE_STATE_WORDS];
            h5_read_uint64s(f, from, "train/data_state", words, INSTANCE_STATE_WORDS);
            int64_t step;
            hsize_t one = 1;
            h5_read_int64s(f, from, "train/step", &step, 1, &one);
            RP_CHECK(step >= 0 && step <= CHECKPOINT_MAX_STEP && step == t->opt.opt.step,
                     "%s: dataset 'train/step': expected the optimizer's step count %lld (in [0, %lld]), got %lld",
                     from, (long long)t->opt.opt.step, (long long)CHECKPOINT_MAX_STEP, (long long)step);
            t->step = (long)step;
            trainer_open_data(t, vocab_origin);
            InstanceState st = instance_state_unpack(words);
            instance_state_set(t->train_stream, &st);
        }
        h5_close(f, from);
        free(stored_ini);
        rp_log("%s %s at step %ld", resume ? "resumed from" : "initialised weights from", from, t->step);
    } else {
        model_init_weights(&t->model, (uint64_t)t->cfg.model.seed);
    }
    dist_broadcast(&t->dist, t->model.params, t->model.table.block_floats); /* rank 0's bits everywhere */
    if (!t->vocab_text) {
        RP_CHECK(t->cfg.data.vocab[0], "%s: key 'vocab' in [data]: expected a vocabulary file, got nothing",
                 config_path);
        t->vocab_text = read_file(t->cfg.data.vocab, NULL, "vocabulary ([data] vocab)");
        trainer_open_data(t, vocab_origin);
    }
    activations_create(&t->acts, &t->model, t->cfg.train.batch_size, t->cfg.data.max_seq_len,
                       trainer_max_predictions(&t->cfg));
}

int pretrain_run(Trainer *t, int resumed) {
    int root = dist_is_root(&t->dist);
    if (root) {
        run_dir_open(t->cfg.train.run_dir, t->config_ini);
        metrics_open(&t->log, t->cfg.train.run_dir, resumed);
    }
    stop_signals_install();
    int rc = train_loop(t);
    if (root)
        metrics_close(&t->log);
    return rc;
}
