/* The launch summary of pretrain and finetune (launch.h). */
#include "train/cli/launch.h"

#include <string.h>

#include "core/common.h"
#include "core/gemm.h"
#include "core/io/files.h"
#include "layers/attention.h"
#include "layers/encoder.h"
#include "layers/positions.h"
#include "train/model/model.h"

/* "absolute + method4 (k = 16)", "method4 (k = 16)", "t5 (32 buckets, max distance 128)", "rope (theta
 * 10000)", "alibi", "absolute", "none": each scheme with the keys that apply to it (schema.c's key_uses). */
static void positions(const ModelConfig *m, char *out, size_t size) {
    const int relative = !pos_scheme(m->relative_position)->adds_nothing;
    char rel[160] = "", settings[96];
    const char *name = rel_kind_name(m->relative_position);
    model_position_settings(m, settings, sizeof settings);
    snprintf(rel, sizeof rel, settings[0] ? "%s (%s)" : "%s%s", name, settings);
    snprintf(out, size, "%s%s%s", m->absolute_position ? "absolute" : "", m->absolute_position && relative ? " + " : "",
             relative ? rel : m->absolute_position ? "" : "none");
}

void launch_report(FILE *out, const Config *cfg, const char *job, const LaunchFacts *f, const char *config_ini,
                   int verbose) {
    const ModelConfig *m = &cfg->model;
    char where[256]; /* "absolute + " and the scheme with its settings (positions) */
    positions(m, where, sizeof where);
    fprintf(out, "%s: model %d layers x %d (%d heads, feed-forward %d, %s-LN), positions %s, residual attention %s\n",
            job, m->num_layers, m->hidden_size, m->num_heads, m->intermediate_size, norm_kind_names[m->norm], where,
            !m->residual_attention ? "no" : m->residual_attention_mean ? "yes (mean)" : "yes");
    if (cfg->train.precision == PRECISION_BF16) /* the emulation is correct but about 100x slower: say so */
        fprintf(out, "  precision bf16, products by %s\n", gemm_host_backend() == GEMM_BF16_EMULATED
                ? "the portable emulation (REALPOS_BF16_EMULATE is on): exact but about 100x slower than oneDNN"
                : "oneDNN");
    fprintf(out, "  data %s\n", f->data);
    fprintf(out, "  %ld steps of %d x %d sequences, lr %g, warm-up %d steps, then %s%s\n", f->steps,
            cfg->train.grad_accum_steps, f->batch_size, (double)f->lr, f->warmup, f->schedule,
            strcmp(f->schedule, "constant") ? " decay to 0" : "");
    if (f->parameters)
        fprintf(out, "  parameters: %s\n", f->parameters);
    fprintf(out, "  run directory %s: config.ini (the whole configuration)%s, metrics.jsonl, metrics.csv%s\n",
            cfg->train.run_dir, f->parameters ? ", parameters.txt (each parameter)" : "",
            verbose ? "" : "; --verbose prints them");
    if (verbose)
        fprintf(out, "# effective configuration\n%s\n", config_ini);
    fflush(out);
}

void launch_write_parameters(FILE *out, const char *run_dir, const char *table, int verbose) {
    char path[CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/parameters.txt", run_dir);
    write_file(path, table, strlen(table));
    if (verbose)
        fputs(table, out);
}
