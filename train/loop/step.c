/* The shared training step and its metrics window (step.h). */
#include "train/loop/step.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "train/loop/peak.h"
#include "core/rng.h"
#include "train/loop/run_dir.h"

/* Sums over one step's micro-batches, as the window accumulates them. */
typedef struct {
    double loss; /* sum of micro-batch losses / accum: the step's mean loss */
    long correct, predictions, tokens;
    double flops;
} StepTotals;

static void next_repeated(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    *out = *(const TrainBatch *)ctx;
}

BatchSource batch_source_repeat(const TrainBatch *tb) { return (BatchSource){next_repeated, NULL, (void *)tb}; }

void train_step_init(TrainStep *ts, const StepConfig *cfg, Model *model, LossHead head, BatchSource source,
                     const OptimConfig *optim, Dist *dist, int shard_optimizer) {
    memset(ts, 0, sizeof *ts);
    ts->cfg = *cfg;
    ts->model = model;
    ts->optim = optim;
    ts->head = head;
    ts->source = source;
    dp_adamw_create(&ts->opt, dist, &model->table, shard_optimizer);
}

void train_step_begin(TrainStep *ts, MetricsLog *log, long first_step) {
    ts->log = log;
    const Activations *acts = ts->head.acts;
    if (acts->precision == PRECISION_BF16) { /* the bf16 peak, on the encoder's products at [B x L] */
        peak_bf16_encoder_shapes(&ts->peak_bf16, gemm_backend(acts->gemm), acts->B * acts->L,
                                 ts->model->cfg.hidden_size, ts->model->cfg.intermediate_size);
        /* the probes run between steps (here and at log windows): their operands take the
         * activations, dead then, so a bf16 run's peak memory is the step's. REALPOS_TEST_PROBE_OWN=1
         * gives them buffers of their own instead: tests/train/loop/test_bf16_memory.sh reads the bytes
         * they allocated (bench's bf16_probe_own_bytes) both ways, 0 when they borrow. */
        if (!env_switch("REALPOS_TEST_PROBE_OWN", 0))
            ts->peak_bf16.borrowed = acts->arena.base, ts->peak_bf16.borrowed_floats = acts->step_floats;
        ts->peak = peak_estimate_bf16(omp_get_max_threads(), &ts->peak_bf16);
    } else {
        ts->peak = peak_estimate(omp_get_max_threads());
    }
    ts->t_begin = now_seconds();
    ts->window_start = first_step;
}

void train_step_free(TrainStep *ts) {
    if (ts->opt.dist)
        dp_adamw_free(&ts->opt);
    memset(ts, 0, sizeof *ts);
}

StepWindow train_step_window(const TrainStep *ts) {
    return (StepWindow){now_seconds() - ts->t_begin, ts->window_seconds, ts->window_loss, ts->window_flops,
                        ts->window_start, ts->window_tokens, ts->window_correct, ts->window_predictions};
}

void train_step_resume_window(TrainStep *ts, const StepWindow *w) {
    ts->t_begin = now_seconds() - w->elapsed_s;
    ts->window_seconds = w->seconds;
    ts->window_loss = w->loss;
    ts->window_flops = w->flops;
    ts->window_start = w->start;
    ts->window_tokens = w->tokens;
    ts->window_correct = w->correct;
    ts->window_predictions = w->predictions;
}

void step_window_pack(const StepWindow *w, double words[STEP_WINDOW_WORDS]) {
    const double packed[STEP_WINDOW_WORDS] = {w->elapsed_s, (double)w->start, w->loss, (double)w->correct,
                                              (double)w->predictions, (double)w->tokens, w->flops, w->seconds};
    memcpy(words, packed, sizeof packed);
}

StepWindow step_window_unpack(const double words[STEP_WINDOW_WORDS]) {
    return (StepWindow){words[0], words[7], words[2], words[6],
                        (long)words[1], (long)words[5], (long)words[3], (long)words[4]};
}

/* Fatal: a non-finite loss or gradient norm. Nothing is saved; the run directory's checkpoints
 * (if any) stay as they are. */
static void stop_non_finite(const TrainStep *ts, long step, const char *what, double value) {
    char latest[CONFIG_PATH_MAX + 32];
    if (ts->cfg.run_dir && run_dir_latest(ts->cfg.run_dir, latest, sizeof latest))
        RP_FATAL("step %ld: the %s is %f; stopping without saving (the last checkpoint, %s, is intact)", step + 1,
                 what, value, latest);
    RP_FATAL("step %ld: the %s is %f; stopping without saving", step + 1, what, value);
}

static void log_window(TrainStep *ts, long done, float lr, double grad_norm) {
    const StepConfig *c = &ts->cfg;
    double now = now_seconds(), dt = ts->window_seconds;
    long in_window = done - ts->window_start;
    MetricsRecord rec = {
        .kind = "train", .step = done, .total_steps = c->total_steps,
        .loss = ts->window_loss / (double)in_window,
        .accuracy = ts->window_predictions ? (double)ts->window_correct / (double)ts->window_predictions : 0,
        .lr = lr, .grad_norm = grad_norm, .tokens_per_s = (double)ts->window_tokens / dt,
        .gflops = ts->window_flops / dt * 1e-9,
        .elapsed_s = now - ts->t_begin, .eta_s = dt / (double)in_window * (double)(c->total_steps - done)};
    if (done % c->log_interval == 0 || done == c->total_steps) {
        /* MFU against the peak of all ranks: one more probe between steps, then (fp32) the peak
         * raised to this window if it ran faster (train/loop/peak.h), so mfu <= 1 without a clamp; the
         * bf16 peak is never raised. */
        int ranks = ts->opt.dist->size;
        peak_refine(&ts->peak);
        rec.mfu = peak_utilisation(&ts->peak, rec.gflops / ranks);
        rec.peak_gflops = ts->peak.gflops * ranks;
        rec.peak_source = ts->peak.source;
        rec.peak_precision = precision_names[ts->peak.precision];
        if (ts->log)
            metrics_write(ts->log, &rec);
        ts->window_seconds = ts->window_loss = ts->window_flops = 0;
        ts->window_tokens = ts->window_correct = ts->window_predictions = 0;
        ts->window_start = done;
    } else if (ts->log) {
        metrics_progress(ts->log, &rec);
    }
}

void train_step(TrainStep *ts, long step) {
    const StepConfig *c = &ts->cfg;
    Model *m = ts->model;
    Dist *dist = ts->opt.dist;
    int accum = c->grad_accum_steps;
    double t_step = now_seconds(), comm_before = dist->comm_seconds;
    int first = (int)((long)accum * dist->rank / dist->size), end = (int)((long)accum * (dist->rank + 1) / dist->size);
    StepTotals totals = {0, 0, 0, 0, 0};
    /* m->grads is zero here: allocated zeroed, and every update (dp_adamw_update) leaves it so */
    for (int micro = 0; micro < accum; micro++) {
        if (micro < first || micro >= end) { /* another rank's micro-batch */
            if (ts->source.skip) {
                ts->source.skip(ts->source.ctx, step, micro);
            } else {
                TrainBatch ignored;
                ts->source.next(ts->source.ctx, step, micro, &ignored);
            }
            continue;
        }
        TrainBatch tb;
        ts->source.next(ts->source.ctx, step, micro, &tb);
        uint64_t key = hash_key(c->dropout_seed, (uint64_t)step, (uint64_t)micro);
        double t0 = now_seconds();
        ForwardStats st = loss_forward(m, &ts->head, &tb, FORWARD_TRAIN, key);
        if (!isfinite(st.loss))
            stop_non_finite(ts, step, "loss", st.loss);
        double t1 = now_seconds();
        loss_backward(m, &ts->head, &tb, 1.0f / (float)accum);
        ts->phases.forward += t1 - t0;
        ts->phases.backward += now_seconds() - t1;
        totals.loss += (double)st.loss / accum;
        totals.correct += st.num_correct;
        totals.predictions += st.num_predicted;
        totals.tokens += tb.num_tokens;
        totals.flops += loss_flops(m, &ts->head, &tb, &st);
    }
    double t_update = now_seconds();
    /* the job's totals and stop flag, then the gradient summed over ranks and clipped */
    double sums[6] = {totals.loss, (double)totals.correct, (double)totals.predictions, (double)totals.tokens,
                      totals.flops, stop_signal_received() != 0};
    dist_sum_doubles(dist, sums, 6);
    totals = (StepTotals){sums[0], (long)sums[1], (long)sums[2], (long)sums[3], sums[4]};
    ts->stop = sums[5] > 0;
    GradClip clip = dp_adamw_reduce(&ts->opt, m->grads, c->clip_grad_norm);
    if (!isfinite(clip.norm))
        stop_non_finite(ts, step, "gradient norm", clip.norm);
    float lr = lr_schedule(c->schedule, c->peak_lr, (int)step, c->warmup_steps, (int)c->total_steps);
    dp_adamw_update(&ts->opt, &m->table, m->params, m->grads, ts->head.acts->weights16, ts->optim, lr, clip.scale);
    ts->phases.update += now_seconds() - t_update;
    ts->last_loss = totals.loss, ts->last_grad_norm = clip.norm, ts->last_lr = lr;

    ts->window_loss += totals.loss;
    ts->window_correct += totals.correct;
    ts->window_predictions += totals.predictions;
    ts->window_tokens += totals.tokens;
    ts->window_flops += totals.flops;
    double seconds = now_seconds() - t_step;
    ts->window_seconds += seconds;
    ts->step_seconds += seconds;
    ts->comm_seconds += dist->comm_seconds - comm_before;
    log_window(ts, step + 1, lr, clip.norm);
}

void train_step_log_communication(const TrainStep *ts, long steps) {
    if (ts->opt.dist->size == 1 || steps <= 0)
        return;
    rp_log("data parallel: %d ranks%s, communication %.1f ms per step on rank 0 (%.1f%% of step time)",
           ts->opt.dist->size, ts->opt.sharded ? " (ZeRO-1)" : "", 1e3 * ts->comm_seconds / (double)steps,
           100.0 * ts->comm_seconds / ts->step_seconds);
}
