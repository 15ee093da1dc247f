/* realpos pretrain / eval: arguments and configuration; the task is train/loop/pretrain.c, the run
 * train/loop/run.c. */
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "core/io/paths.h"
#include "train/cli/commands.h"
#include "train/cli/launch.h"
#include "train/loop/pretrain.h"
#include "train/model/checkpoint.h"

int cmd_pretrain(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *resume = NULL, *init = NULL;
    int overwrite = cli_take_flag(&argc, argv, "overwrite"), verbose = cli_take_flag(&argc, argv, "verbose");
    CliOption options[] = {{"resume", &resume}, {"init", &init}};
    CliArgs args = cli_parse(argc, argv, options, 2);
    RP_CHECK(args.num_positional == 1 || (resume && !args.num_positional), "usage: realpos %s", usage);
    RP_CHECK(!(resume && init), "--resume and --init are exclusive; usage: realpos %s", usage);
    RP_CHECK(!(resume && overwrite), "--resume continues the run in train.run_dir and --overwrite moves it aside: "
             "give one; usage: realpos %s", usage);
    Dist dist;
    dist_init(&dist, NULL, NULL); /* under mpirun/srun: this rank of the job */
    if (resume) /* a fine-tuning checkpoint is named as such before any key of its config is */
        run_require_resumable(resume, "pretraining");
    Config cfg;
    StoredConfig stored = {0};
    const char *config_path = args.num_positional ? args.positional[0] : NULL;
    if (config_path) {
        config_load(&cfg, JOB_PRETRAIN, config_path, args.num_sets, args.sets);
    } else { /* --resume RUN_DIR alone: the run's own configuration */
        run_stored_config(&stored, resume, args.num_sets, args.sets);
        config_path = stored.path;
        config_load_text(&cfg, JOB_PRETRAIN, stored.ini, stored.path, stored.num_sets, stored.sets);
    }
    dist_set_threads(&dist, cfg.train.threads);
    config_report_job(&cfg);
    char *config_ini = config_to_ini(&cfg);
    if (dist_is_root(&dist)) {
        char data[CONFIG_PATH_MAX + 128];
        snprintf(data, sizeof data, "shards of %s, sequences of %d tokens, %.0f%% masked, batches %s", cfg.data.shard_dir,
                 cfg.data.max_seq_len, 100 * (double)cfg.data.masked_lm_prob,
                 cfg.data.padding == PAD_NONE      ? "unpadded (data.padding = none)"
                 : cfg.data.padding == PAD_LONGEST ? "padded to their longest row (data.padding = longest)"
                                                   : "padded to max_seq_len (data.padding = max_length)");
        LaunchFacts facts = {data, cfg.train.max_steps, config_warmup_steps(&cfg), cfg.train.batch_size, cfg.optim.lr,
                             schedule_kind_names[cfg.train.schedule], NULL};
        launch_report(stderr, &cfg, "pretraining", &facts, config_ini, verbose);
    }
    RunStart start = {"pretraining", resume, overwrite,
                      {{config_path, "the config"}, {cfg.data.vocab, "key 'data.vocab'"},
                       {cfg.data.shard_dir, "key 'data.shard_dir'"}, {init, "--init"}}, 4, verbose};
    int rc = pretrain(&cfg, config_ini, config_path, &dist, &start, init);
    free(config_ini);
    run_stored_config_free(&stored);
    dist_finalize(&dist);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *ckpt = NULL, *max_len = NULL, *json = NULL;
    CliOption options[] = {{"checkpoint", &ckpt}, {"max-seq-len", &max_len}, {"json", &json}};
    CliArgs args = cli_parse(argc, argv, options, 3);
    RP_CHECK(args.num_positional == 1 && ckpt, "usage: realpos %s", usage);
    char ckpt_file[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest, before the path rules */
    checkpoint_resolve(ckpt, "--checkpoint", ckpt_file, sizeof ckpt_file);
    ckpt = ckpt_file;
    if (json) {
        IoPlan plan;
        io_plan_init(&plan);
        io_plan_input(&plan, args.positional[0], "the config");
        io_plan_input(&plan, ckpt, "--checkpoint");
        io_plan_output(&plan, json, "--json");
        io_plan_check(&plan);
    }
    Config cfg;
    config_load(&cfg, JOB_PRETRAIN, args.positional[0], args.num_sets, args.sets);
    if (cfg.train.threads > 0)
        omp_set_num_threads(cfg.train.threads);
    CheckpointFile c;
    checkpoint_file_open(&c, ckpt);
    config_report_differences(&cfg, &c.cfg, "model", ckpt, "eval uses the checkpoint's model");
    cfg.model = c.cfg.model; /* the checkpoint defines the model */
    if (max_len)
        cfg.data.max_seq_len = (int)cli_int("--max-seq-len", max_len, 2, 1 << 16);
    RP_CHECK(!cfg.model.absolute_position || cfg.data.max_seq_len <= cfg.model.max_position,
             "--max-seq-len %d exceeds the checkpoint's model.max_position = %d (absolute positions)",
             cfg.data.max_seq_len, cfg.model.max_position);
    RP_CHECK(c.heads.mlm, "%s: no MLM head (cls/predictions): a fine-tuned checkpoint; eval scores the masked-LM "
             "loss of a pretrained one", ckpt);
    Model model;
    checkpoint_file_model(&c, &model, 1);
    int lower = cfg.data.do_lower_case;
    char *vocab = checkpoint_read_vocab(c.file, ckpt, &lower);
    checkpoint_file_close(&c);
    const char *vocab_origin = vocab ? ckpt : cfg.data.vocab; /* named in the vocabulary's errors */
    if (!vocab)
        vocab = read_file(cfg.data.vocab, NULL, "vocabulary ([data] vocab)");
    cfg.data.do_lower_case = lower;
    MlmData data;
    mlm_data_open(&data, &cfg, vocab, vocab_origin);
    Activations acts;
    activations_create(&acts, &model, cfg.train.batch_size, cfg.data.max_seq_len, mlm_max_predictions(&cfg),
                       cfg.train.precision);
    EvalResult r = evaluate_mlm(&model, &acts, &data, cfg.train.eval_batches, NULL);
    printf("eval %s: max_seq_len %d, %ld predictions: mlm loss %.4f, accuracy %.4f, perplexity %.2f "
           "(unigram baseline accuracy %.4f: always '%s')\n",
           ckpt, cfg.data.max_seq_len, r.predictions, r.loss, r.accuracy, r.perplexity, r.unigram_accuracy,
           tokenizer_token(data.tok, data.unigram_token));
    RP_CHECK(isfinite(r.loss), "%s: the held-out loss is %g: the model's outputs are not finite", ckpt, r.loss);
    if (json) { /* the same numbers at full double precision (cJSON prints the shortest exact text) */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "checkpoint", ckpt);
        cJSON_AddNumberToObject(o, "max_seq_len", cfg.data.max_seq_len);
        cJSON_AddNumberToObject(o, "predictions", (double)r.predictions);
        cJSON_AddNumberToObject(o, "loss", r.loss);
        cJSON_AddNumberToObject(o, "accuracy", r.accuracy);
        cJSON_AddNumberToObject(o, "perplexity", r.perplexity);
        cJSON_AddNumberToObject(o, "unigram_accuracy", r.unigram_accuracy);
        char *text = cJSON_PrintUnformatted(o);
        RP_CHECK(text, "out of memory formatting --json");
        size_t length = strlen(text);
        char *line = xmalloc(length + 2);
        memcpy(line, text, length);
        memcpy(line + length, "\n", 2);
        write_file(json, line, length + 1);
        free(line);
        cJSON_free(text);
        cJSON_Delete(o);
    }
    activations_free(&acts);
    mlm_data_free(&data);
    model_free(&model);
    return 0;
}
