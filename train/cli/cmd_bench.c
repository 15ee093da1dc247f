/* realpos bench: time full training steps (forward, backward, AdamW) on random data, and the
 * cblas_sgemm peak of this machine in the same process, for `make bench`. */
#include <omp.h>
#include <string.h>
#include <sys/resource.h>

#include "core/cli.h"
#include "core/common.h"
#include "train/config/config.h"
#include "core/peak.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "train/cli/commands.h"
#include "train/model/model.h"

int cmd_bench(int argc, char **argv) {
    const char *usage = "bench CONFIG.ini [--set section.key=value ...] --batch-size B --seq-len L "
                        "[--steps N] [--warmup W] [--label-frac F] [--json OUT]";
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
    config_load(&cfg, args.positional[0], args.num_sets, args.sets);

    Model m;
    model_create(&m, &cfg.model, heads_mlm());
    model_init_weights(&m, (uint64_t)cfg.model.seed);
    AdamW opt;
    adamw_create(&opt, &m.table);

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
        labels[n] = labelled ? (int)rng_below(&rng, (uint64_t)cfg.model.vocab_size) : -100;
        M += labelled;
    }
    Batch batch = {B, L, ids, types, mask, labels};
    Activations acts;
    activations_create(&acts, &m, B, L, M);

    double t_start = 0, t_forward = 0, t_backward = 0, t_update = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup)
            t_start = now_seconds(), t_forward = t_backward = t_update = 0;
        double t0 = now_seconds();
        memset(m.grads, 0, sizeof(float) * m.table.block_floats);
        model_forward(&m, &acts, &batch, 1, (uint64_t)s, NULL);
        double t1 = now_seconds();
        model_backward(&m, &acts, &batch, 1.0f);
        double t2 = now_seconds();
        GradClip clip = grad_clip(m.grads, m.table.block_floats, cfg.train.clip_grad_norm);
        adamw_step(&opt, &m.table, m.params, m.grads, &cfg.optim, cfg.optim.lr, clip.scale);
        double t3 = now_seconds();
        t_forward += t1 - t0, t_backward += t2 - t1, t_update += t3 - t2;
    }
    double elapsed = now_seconds() - t_start;
    double tokens_per_s = (double)N * steps / elapsed;
    double gflops = model_flops_per_step(&cfg.model, B, L, M) * steps / elapsed * 1e-9;
    double peak = sgemm_peak_gflops();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    printf("realpos: %d threads, %.1f tokens/s, %.1f GFLOP/s (%.0f%% of sgemm peak %.1f), peak RSS %.0f MB; "
           "per step: forward %.3f s, backward %.3f s, clip+AdamW %.3f s\n",
           omp_get_max_threads(), tokens_per_s, gflops, 100.0 * gflops / peak, peak, rss_mb, t_forward / steps,
           t_backward / steps, t_update / steps);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        RP_CHECK(f, "%s: cannot write", json_path);
        fprintf(f,
                "{\"impl\": \"realpos\", \"threads\": %d, \"batch_size\": %d, \"seq_len\": %d, \"steps\": %d, "
                "\"labelled\": %d, \"tokens_per_s\": %.3f, \"gflops\": %.3f, \"sgemm_peak_gflops\": %.3f, "
                "\"peak_rss_mb\": %.1f, \"seconds_per_step\": %.6f, \"forward_s\": %.6f, \"backward_s\": %.6f, "
                "\"update_s\": %.6f}\n",
                omp_get_max_threads(), B, L, steps, M, tokens_per_s, gflops, peak, rss_mb, elapsed / steps,
                t_forward / steps, t_backward / steps, t_update / steps);
        fclose(f);
    }
    activations_free(&acts);
    adamw_free(&opt);
    model_free(&m);
    free(ids), free(types), free(mask), free(labels);
    return 0;
}
