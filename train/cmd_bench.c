/* realpos bench: time full training steps (forward, backward, AdamW) on random data, and the
 * cblas_sgemm peak of this machine in the same process, for `make bench`. */
#include <omp.h>
#include <string.h>
#include <sys/resource.h>

#include "../core/common.h"
#include "../core/config.h"
#include "../core/peak.h"
#include "../core/rng.h"
#include "../optim/adamw.h"
#include "commands.h"
#include "model.h"

static double parse_number(const char *flag, const char *v, double lo, double hi) {
    char *end;
    double x = strtod(v, &end);
    RP_CHECK(*v && !*end && x >= lo && x <= hi, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, v);
    return x;
}

int cmd_bench(int argc, char **argv) {
    const char *usage = "bench CONFIG.ini [--set section.key=value ...] --batch-size B --seq-len L "
                        "[--steps N] [--warmup W] [--label-frac F] [--json OUT]";
    const char *config_path = NULL, *json_path = NULL;
    char *sets[64];
    int num_sets = 0, B = 0, L = 0, steps = 10, warmup = 2;
    double label_frac = 0.15;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--set") && val && num_sets < 64) sets[num_sets++] = argv[++i];
        else if (!strcmp(arg, "--batch-size") && val) B = (int)parse_number(arg, argv[++i], 1, 1 << 20);
        else if (!strcmp(arg, "--seq-len") && val) L = (int)parse_number(arg, argv[++i], 1, 1 << 20);
        else if (!strcmp(arg, "--steps") && val) steps = (int)parse_number(arg, argv[++i], 1, 1 << 20);
        else if (!strcmp(arg, "--warmup") && val) warmup = (int)parse_number(arg, argv[++i], 0, 1 << 20);
        else if (!strcmp(arg, "--label-frac") && val) label_frac = parse_number(arg, argv[++i], 0, 1);
        else if (!strcmp(arg, "--json") && val) json_path = argv[++i];
        else if (arg[0] != '-' && !config_path) config_path = arg;
        else RP_FATAL("unknown or incomplete option '%s'; usage: realpos %s", arg, usage);
    }
    RP_CHECK(config_path && B && L, "usage: realpos %s", usage);
    Config cfg;
    config_load(&cfg, config_path, num_sets, sets);

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

    double t_start = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup)
            t_start = now_seconds();
        memset(m.grads, 0, sizeof(float) * m.table.block_floats);
        model_forward(&m, &acts, &batch, 1, (uint64_t)s, NULL);
        model_backward(&m, &acts, &batch, 1.0f);
        grad_clip(m.grads, m.table.block_floats, cfg.train.clip_grad_norm);
        adamw_step(&opt, &m.table, m.params, m.grads, &cfg.optim, cfg.optim.lr);
    }
    double elapsed = now_seconds() - t_start;
    double tokens_per_s = (double)N * steps / elapsed;
    double gflops = model_flops_per_step(&cfg.model, B, L, M) * steps / elapsed * 1e-9;
    double peak = sgemm_peak_gflops();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    printf("realpos: %d threads, %.1f tokens/s, %.1f GFLOP/s (%.0f%% of sgemm peak %.1f), peak RSS %.0f MB\n",
           omp_get_max_threads(), tokens_per_s, gflops, 100.0 * gflops / peak, peak, rss_mb);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        RP_CHECK(f, "%s: cannot write", json_path);
        fprintf(f,
                "{\"impl\": \"realpos\", \"threads\": %d, \"batch_size\": %d, \"seq_len\": %d, \"steps\": %d, "
                "\"labelled\": %d, \"tokens_per_s\": %.3f, \"gflops\": %.3f, \"sgemm_peak_gflops\": %.3f, "
                "\"peak_rss_mb\": %.1f, \"seconds_per_step\": %.6f}\n",
                omp_get_max_threads(), B, L, steps, M, tokens_per_s, gflops, peak, rss_mb, elapsed / steps);
        fclose(f);
    }
    activations_free(&acts);
    adamw_free(&opt);
    model_free(&m);
    free(ids), free(types), free(mask), free(labels);
    return 0;
}
