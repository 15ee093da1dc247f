/* realpos bench: time the training step users train with (train_step of train/loop/step.h: forward,
 * backward, gradient reduction and clipping, AdamW) on a synthetic batch source, and the
 * cblas_sgemm peak of this machine in the same process, for `make bench` (scripts/dev/bench.sh).
 * The peak is the step's own (core/peak.h: the one training logs use, start-up probes and the
 * per-host cache), probed again after every step (outside the step timings); the probes' spread
 * shows the noise. */
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/cli.h"
#include "core/common.h"
#include "train/config/config.h"
#include "core/peak.h"
#include "core/rng.h"
#include "layers/layers.h"
#include "train/cli/commands.h"
#include "train/loop/step.h"
#include "train/model/model.h"

/* The synthetic batch source: the same random batch every micro-batch. */
static void next_random_batch(void *ctx, long step, int micro, TrainBatch *out) {
    (void)step, (void)micro;
    *out = *(const TrainBatch *)ctx;
}

int cmd_bench(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *json_path = NULL, *batch_text = NULL, *seq_text = NULL, *steps_text = "10",
               *warmup_text = "2", *label_text = "0.15";
    CliOption options[] = {{"batch-size", &batch_text}, {"seq-len", &seq_text}, {"steps", &steps_text},
                           {"warmup", &warmup_text}, {"label-frac", &label_text}, {"json", &json_path}};
    CliArgs args = cli_parse(argc, argv, options, 6);
    RP_CHECK(args.num_positional == 1 && batch_text && seq_text, "usage: realpos %s", usage);
    int B = (int)cli_int("--batch-size", batch_text, 1, 1 << 20), L = (int)cli_int("--seq-len", seq_text, 1, 1 << 20);
    int steps = (int)cli_int("--steps", steps_text, 1, 1 << 20), warmup = (int)cli_int("--warmup", warmup_text, 0, 1 << 20);
    char *end;
    double label_frac = strtod(label_text, &end);
    RP_CHECK(*label_text && !*end && label_frac >= 0 && label_frac <= 1, "option '--label-frac': expected a number "
             "in [0, 1], got '%s'", label_text);
    Config cfg;
    config_load_model(&cfg, args.positional[0], args.num_sets, args.sets);
    if (cfg.train.threads > 0)
        omp_set_num_threads(cfg.train.threads);

    Model m;
    model_create(&m, &cfg.model, heads_mlm());
    model_init_weights(&m, (uint64_t)cfg.model.seed);
    Dist dist;
    dist_init(&dist, NULL, NULL);
    DpAdamW opt;
    dp_adamw_create(&opt, &dist, &m.table, 0);

    /* Random batch: full-length sequences, a fixed fraction of positions labelled. */
    size_t N = (size_t)B * L;
    int *ids = xmalloc(sizeof(int) * N), *types = xcalloc(N, sizeof(int)), *mask = xmalloc(sizeof(int) * N),
        *labels = xmalloc(sizeof(int) * N);
    Rng rng;
    rng_seed(&rng, 1234);
    int M = 0;
    for (size_t n = 0; n < N; n++) {
        ids[n] = (int)rng_below(&rng, (uint64_t)cfg.model.vocab_size);
        mask[n] = 1;
        int labelled = rng_uniform(&rng) < label_frac;
        labels[n] = labelled ? (int)rng_below(&rng, (uint64_t)cfg.model.vocab_size) : IGNORE_LABEL;
        M += labelled;
    }
    TrainBatch batch = {{B, L, ids, types, mask, labels}, {0}, (long)N};
    Activations acts;
    activations_create(&acts, &m, B, L, M);
    StepConfig sc = {SCHED_CONSTANT, cfg.optim.lr, 0, warmup + steps, 1, cfg.train.clip_grad_norm,
                     (uint64_t)cfg.model.seed, warmup + steps + 1, NULL};
    TrainStep ts;
    train_step_init(&ts, &sc, &m, &opt, &cfg.optim, loss_head_mlm(&acts), (BatchSource){next_random_batch, NULL, &batch},
                    NULL, 0);

    const int max_probes = steps + 1;
    double *probes = xmalloc(sizeof(double) * (size_t)max_probes), *step_s = xmalloc(sizeof(double) * (size_t)steps);
    int num_probes = 0;
    PeakEstimate *peak = &ts.peak;
    peak->spread_left = 0; /* the bench probes after every step itself, outside the timings */
    probes[num_probes++] = peak->probe_gflops;
    double elapsed = 0, cpu_elapsed = 0, t_forward = 0, t_backward = 0, t_update = 0;
    for (int s = 0; s < warmup + steps; s++) {
        StepPhases before = ts.phases;
        double t0 = now_seconds(), c0 = cpu_seconds();
        train_step(&ts, s);
        double t1 = now_seconds(), c1 = cpu_seconds();
        if (s < warmup)
            continue;
        step_s[s - warmup] = t1 - t0;
        elapsed += t1 - t0, cpu_elapsed += c1 - c0;
        t_forward += ts.phases.forward - before.forward;
        t_backward += ts.phases.backward - before.backward;
        t_update += ts.phases.update - before.update;
        probes[num_probes++] = peak_probe(peak);
    }
    double tokens_per_s = (double)N * steps / elapsed;
    double gflops = model_flops_per_step(&cfg.model, B, L, M) * steps / elapsed * 1e-9;
    double fraction = peak_utilisation(peak, gflops);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    char cpu_model[256];
    cpu_model_name(cpu_model, sizeof cpu_model);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("realpos: %d threads, %.1f tokens/s, %.1f GFLOP/s (%.0f%% of peak %.1f from the %s; this run's %d "
           "probes best %.1f), "
           "peak RSS %.0f MB; per step: forward %.3f s, backward %.3f s, reduce+clip+AdamW %.3f s, CPU %.3f s; "
           "%s, OpenBLAS core %s%s%s\n",
           omp_get_max_threads(), tokens_per_s, gflops, 100.0 * fraction, peak->gflops, peak->source, peak->probes,
           peak->probe_gflops,
           rss_mb, t_forward / steps, t_backward / steps, t_update / steps, cpu_elapsed / steps, cpu_model,
           blas_core_name(), coretype ? ", OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    if (json_path) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "impl", "realpos");
        cJSON_AddNumberToObject(o, "threads", omp_get_max_threads());
        cJSON_AddNumberToObject(o, "batch_size", B);
        cJSON_AddNumberToObject(o, "seq_len", L);
        cJSON_AddNumberToObject(o, "steps", steps);
        cJSON_AddNumberToObject(o, "labelled", M);
        cJSON_AddNumberToObject(o, "tokens_per_s", tokens_per_s);
        cJSON_AddNumberToObject(o, "gflops", gflops);
        cJSON_AddNumberToObject(o, "sgemm_peak_gflops", peak->probe_gflops); /* the best of probes[] */
        cJSON_AddNumberToObject(o, "peak_gflops", peak->gflops);
        cJSON_AddStringToObject(o, "peak_source", peak->source);
        cJSON_AddNumberToObject(o, "peak_fraction", fraction);
        cJSON_AddItemToObject(o, "sgemm_probes_gflops", cJSON_CreateDoubleArray(probes, num_probes));
        cJSON_AddItemToObject(o, "step_seconds", cJSON_CreateDoubleArray(step_s, steps));
        cJSON_AddNumberToObject(o, "peak_rss_mb", rss_mb);
        cJSON_AddNumberToObject(o, "seconds_per_step", elapsed / steps);
        cJSON_AddNumberToObject(o, "cpu_seconds_per_step", cpu_elapsed / steps);
        cJSON_AddNumberToObject(o, "forward_s", t_forward / steps);
        cJSON_AddNumberToObject(o, "backward_s", t_backward / steps);
        cJSON_AddNumberToObject(o, "update_s", t_update / steps);
        cJSON_AddStringToObject(o, "cpu_model", cpu_model);
        cJSON_AddStringToObject(o, "openblas_corename", blas_core_name());
        if (coretype)
            cJSON_AddStringToObject(o, "openblas_coretype_env", coretype);
        else
            cJSON_AddNullToObject(o, "openblas_coretype_env");
        char *text = cJSON_Print(o);
        size_t len = strlen(text);
        text = realloc(text, len + 2);
        RP_CHECK(text, "out of memory");
        memcpy(text + len, "\n", 2);
        write_file(json_path, text, len + 1); /* temp + fsync + rename */
        free(text);
        cJSON_Delete(o);
    }
    free(probes), free(step_s);
    activations_free(&acts);
    dp_adamw_free(&opt);
    dist_finalize(&dist);
    model_free(&m);
    free(ids), free(types), free(mask), free(labels);
    return 0;
}
