/* realpos init | inspect | dump: create, examine and differentiate a model checkpoint. dump
 * --train-steps S trains S steps on its one batch with the training step users train with
 * (train_step, train/loop/step.h: clipping at train.clip_grad_norm, the train.schedule with its
 * warm-up over S steps, AdamW), without dropout, so that tests/reference/reference.py can follow it. */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "train/config/config.h"
#include "core/io/h5io.h"
#include "core/io/paths.h"
#include "layers/layers.h"
#include "optim/adamw.h"
#include "train/model/checkpoint.h"
#include "train/cli/commands.h"
#include "train/loop/step.h"
#include "train/model/batch_layout.h"
#include "train/model/model.h"

/* Load a checkpoint's config and parameters into a freshly created model. */
static void load_checkpoint_model(const char *path, Config *cfg, char **config_ini, Model *m) {
    CheckpointFile c;
    checkpoint_file_open(&c, path);
    *cfg = c.cfg;
    *config_ini = xstrdup(c.config_ini);
    checkpoint_file_model(&c, m, 0);
    checkpoint_file_close(&c);
}

int cmd_init(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *out = NULL;
    CliOption options[] = {{"out", &out}};
    CliArgs a = cli_parse(argc, argv, options, 1);
    RP_CHECK(a.num_positional == 1 && out, "usage: realpos %s", usage);
    Config cfg;
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, a.positional[0], "the config");
    io_plan_output(&plan, out, "--out");
    io_plan_check(&plan);
    config_load_model(&cfg, a.positional[0], a.num_sets, a.sets);
    char *ini = config_to_ini(&cfg);
    fprintf(stderr, "%s", ini);
    Model m;
    model_create(&m, &cfg.model, heads_mlm());
    model_init_weights(&m, (uint64_t)cfg.model.seed);
    CheckpointExtras extras = {.config_ini = ini};
    checkpoint_save(out, &m, &extras);
    rp_log("wrote %s", out);
    model_free(&m);
    free(ini);
    return 0;
}

/* inspect --verify: checksum, then every stored tensor (parameters, optimizer moments) read and
 * checked finite; prints the verdict, fatal on the first problem. */
static int verify_checkpoint(const char *path) {
    char why[256];
    H5SealStatus seal = h5_check_seal(path, why, sizeof why);
    RP_CHECK(seal == H5_SEAL_OK, "%s: %s", path, why);
    printf("%s: %s\n", path, why);
    CheckpointFile c;
    checkpoint_file_open(&c, path);
    Model m;
    checkpoint_file_model(&c, &m, 0);
    AdamW opt;
    adamw_create(&opt, &m.table);
    int has_optimizer = checkpoint_load_optimizer(c.file, path, &m, &opt);
    checkpoint_file_close(&c);
    printf("%s: %d parameter tensors%s: present, right shapes, finite\n", path, m.table.count,
           has_optimizer ? " and their optimizer moments" : "");
    adamw_free(&opt);
    model_free(&m);
    return 0;
}

int cmd_inspect(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    int verify = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--verify")) {
            verify = 1;
            argv[i--] = argv[--argc];
        }
    CliArgs a = cli_parse(argc, argv, NULL, 0);
    RP_CHECK(a.num_positional == 1 && !a.num_sets, "usage: realpos %s", usage);
    char path[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest */
    checkpoint_resolve(a.positional[0], NULL, path, sizeof path);
    if (verify)
        return verify_checkpoint(path);
    Config cfg;
    char *ini;
    Model m;
    load_checkpoint_model(path, &cfg, &ini, &m);
    printf("# config\n%s\n# parameters\n", ini);
    printf("%-62s %-14s %12s %12s %12s\n", "name", "shape", "count", "mean", "std");
    size_t total = 0;
    for (int i = 0; i < m.table.count; i++) {
        const ParamInfo *p = &m.table.items[i];
        const float *w = m.params + p->offset;
        double sum = 0, sq = 0;
        for (size_t e = 0; e < p->count; e++) {
            sum += w[e];
            sq += (double)w[e] * w[e];
        }
        double mean = sum / (double)p->count, var = sq / (double)p->count - mean * mean;
        char shape[64];
        hsize_t dims[2];
        h5_shape_text(shape, sizeof shape, h5_param_dims(p, dims), dims);
        printf("%-62s %-14s %12zu %12.6f %12.6f\n", p->name, shape, p->count, mean, sqrt(var > 0 ? var : 0));
        total += p->count;
    }
    printf("total parameters: %zu\n", total);
    model_free(&m);
    free(ini);
    return 0;
}

typedef struct {
    int B, L;
    int32_t *input_ids, *token_type_ids, *attention_mask, *labels;
} BatchFile;

/* Read and validate a batch file against the model's vocabulary and position limits. */
static BatchFile read_batch_file(const char *path, const ModelConfig *c) {
    BatchFile bf = {0};
    hid_t f = h5_open(path, 0);
    hsize_t dims[4];
    int rank = h5_shape(f, path, "input_ids", dims);
    RP_CHECK(rank == 2 && dims[0] > 0 && dims[1] > 0, "%s: dataset 'input_ids': expected shape [B, L]", path);
    bf.B = (int)dims[0];
    bf.L = (int)dims[1];
    size_t n = (size_t)bf.B * bf.L;
    int32_t **fields[4] = {&bf.input_ids, &bf.token_type_ids, &bf.attention_mask, &bf.labels};
    const char *names[4] = {"input_ids", "token_type_ids", "attention_mask", "labels"};
    for (int i = 0; i < 4; i++) {
        *fields[i] = xmalloc(sizeof(int32_t) * n);
        h5_read_ints(f, path, names[i], *fields[i], 2, dims);
    }
    h5_close(f, path);
    for (size_t e = 0; e < n; e++) {
        RP_CHECK(bf.input_ids[e] >= 0 && bf.input_ids[e] < c->vocab_size,
                 "%s: dataset 'input_ids': expected ids in [0, %d), got %d at index %zu", path, c->vocab_size,
                 bf.input_ids[e], e);
        RP_CHECK(bf.token_type_ids[e] >= 0 && bf.token_type_ids[e] < c->type_vocab_size,
                 "%s: dataset 'token_type_ids': expected ids in [0, %d), got %d at index %zu", path,
                 c->type_vocab_size, bf.token_type_ids[e], e);
        RP_CHECK(bf.attention_mask[e] == 0 || bf.attention_mask[e] == 1,
                 "%s: dataset 'attention_mask': expected 0 or 1, got %d at index %zu", path, bf.attention_mask[e], e);
        RP_CHECK(bf.labels[e] == IGNORE_LABEL || (bf.labels[e] >= 0 && bf.labels[e] < c->vocab_size),
                 "%s: dataset 'labels': expected %d or an id in [0, %d), got %d at index %zu", path,
                 IGNORE_LABEL, c->vocab_size, bf.labels[e], e);
    }
    RP_CHECK(!c->absolute_position || bf.L <= c->max_position,
             "%s: sequence length %d exceeds the checkpoint's model.max_position = %d", path, bf.L, c->max_position);
    return bf;
}

static void free_batch_file(BatchFile *bf) {
    free(bf->input_ids);
    free(bf->token_type_ids);
    free(bf->attention_mask);
    free(bf->labels);
}

/* Loss, logits and every gradient of one forward and backward on the batch. */
static void dump_gradients(hid_t out, Model *m, Activations *acts, const Batch *batch) {
    const int M = acts->max_predictions, V = m->cfg.vocab_size;
    float *logits = xalloc_floats((size_t)(M ? M : 1) * V);
    ForwardStats st = model_mlm_forward(m, acts, batch, FORWARD_EVAL_GRAD, 0, logits);
    model_mlm_backward(m, acts, batch, 1.0f);
    h5_write_double(out, "loss", st.loss);
    hsize_t dims[2] = {(hsize_t)M, (hsize_t)V};
    h5_write_floats(out, "logits", logits, 2, dims);
    checkpoint_write_block(out, "grad", &m->table, m->grads);
    free(logits);
}

/* S training steps on the batch (a fresh optimizer: moments zero, step count 0), then the final
 * weights, and per step the loss, the gradient norm before clipping and the learning rate.
 * tokens: the batch's real tokens. */
static void dump_trajectory(hid_t out, Config *cfg, Model *m, Activations *acts, const Batch *batch, long tokens,
                            int steps) {
    cfg->train.max_steps = steps; /* the schedule and its warm-up span the trajectory */
    TrainBatch same = {*batch, {0}, tokens};
    StepConfig sc = {cfg->train.schedule, cfg->optim.lr, config_warmup_steps(cfg), steps, 1, cfg->train.clip_grad_norm,
                     (uint64_t)cfg->model.seed, steps + 1, NULL};
    Dist dist;
    dist_init(&dist, NULL, NULL);
    TrainStep ts;
    train_step_init(&ts, &sc, m, loss_head_mlm(acts), batch_source_repeat(&same), &cfg->optim, &dist, 0);
    train_step_begin(&ts, NULL, 0);
    double *losses = xmalloc(sizeof(double) * 3 * (size_t)steps), *norms = losses + steps, *lrs = norms + steps;
    for (int s = 0; s < steps; s++) {
        train_step(&ts, s);
        losses[s] = ts.last_loss, norms[s] = ts.last_grad_norm, lrs[s] = ts.last_lr;
    }
    h5_write_doubles(out, "trajectory_loss", losses, (hsize_t)steps);
    h5_write_doubles(out, "trajectory_grad_norm", norms, (hsize_t)steps);
    h5_write_doubles(out, "trajectory_lr", lrs, (hsize_t)steps);
    checkpoint_write_block(out, "final", &m->table, m->params);
    free(losses);
    train_step_free(&ts);
    dist_finalize(&dist);
}

int cmd_dump(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *checkpoint = NULL, *batch_path = NULL, *out_path = NULL, *steps_text = "0", *precision_text = NULL;
    const char *padding_text = "max_length";
    CliOption options[] = {{"checkpoint", &checkpoint}, {"batch", &batch_path}, {"out", &out_path},
                           {"train-steps", &steps_text}, {"precision", &precision_text}, {"padding", &padding_text}};
    CliArgs a = cli_parse(argc, argv, options, 6);
    const Precision precision = cli_precision(precision_text);
    RP_CHECK(checkpoint && batch_path && out_path && !a.num_positional && !a.num_sets, "usage: realpos %s", usage);
    int train_steps = (int)cli_int("--train-steps", steps_text, 0, 1000000);
    char checkpoint_file[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest */
    checkpoint_resolve(checkpoint, "--checkpoint", checkpoint_file, sizeof checkpoint_file);
    checkpoint = checkpoint_file;
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, checkpoint, "--checkpoint");
    io_plan_input(&plan, batch_path, "--batch");
    io_plan_output(&plan, out_path, "--out");
    io_plan_check(&plan);
    Config cfg;
    char *ini;
    Model m;
    load_checkpoint_model(checkpoint, &cfg, &ini, &m);
    RP_CHECK(m.heads.mlm, "%s: no MLM head (cls/predictions); dump needs a pretraining checkpoint", checkpoint);
    BatchFile bf = read_batch_file(batch_path, &cfg.model);
    Batch padded = {bf.B, bf.L, bf.input_ids, bf.token_type_ids, bf.attention_mask, bf.labels, NULL};
    int M = 0;
    long tokens = 0;
    for (int e = 0; e < bf.B * bf.L; e++) {
        M += bf.labels[e] != IGNORE_LABEL;
        tokens += bf.attention_mask[e];
    }
    /* the file's [B, L] batch laid out as --padding asks: the same sequences and labels in the same
     * order, so the logits' rows (the labelled positions, row-major) are the same in every layout */
    BatchLayout layout;
    batch_layout_create(&layout, bf.B, bf.L);
    Batch batch = batch_relayout(&layout, &padded, padding_kind_parse(padding_text, "--padding"));
    if (train_steps && (m.cfg.hidden_dropout > 0 || m.cfg.attention_dropout > 0))
        rp_log("dump --train-steps: dropout off (the checkpoint's model.hidden_dropout = %g, attention_dropout = %g), "
               "as the reference trains", (double)m.cfg.hidden_dropout, (double)m.cfg.attention_dropout);
    m.cfg.hidden_dropout = m.cfg.attention_dropout = 0.0f;
    Activations acts;
    activations_create(&acts, &m, bf.B, bf.L, M, precision);
    char tmp[4096];
    hid_t out = h5_create_temp(out_path, tmp, sizeof tmp);
    if (train_steps == 0)
        dump_gradients(out, &m, &acts, &batch);
    else
        dump_trajectory(out, &cfg, &m, &acts, &batch, tokens, train_steps);
    h5_commit(out, tmp, out_path);
    activations_free(&acts);
    batch_layout_free(&layout);
    free_batch_file(&bf);
    model_free(&m);
    free(ini);
    return 0;
}
