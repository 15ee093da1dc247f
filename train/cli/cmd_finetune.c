/* realpos finetune / predict: arguments, the task's model and data; the task is train/loop/finetune.c,
 * the run train/loop/run.c. */
#include <string.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/config/config_parse.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "core/io/paths.h"
#include "train/cli/commands.h"
#include "train/cli/launch.h"
#include "train/loop/finetune.h"
#include "train/model/checkpoint.h"

int cmd_finetune(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *resume = NULL;
    int overwrite = cli_take_flag(&argc, argv, "overwrite"), verbose = cli_take_flag(&argc, argv, "verbose");
    CliOption options[] = {{"resume", &resume}};
    CliArgs args = cli_parse(argc, argv, options, 1);
    RP_CHECK(args.num_positional == 1 || (resume && !args.num_positional), "usage: realpos %s", usage);
    RP_CHECK(!(resume && overwrite), "--resume continues the run in train.run_dir and --overwrite moves it aside: "
             "give one; usage: realpos %s", usage);
    Dist dist;
    dist_init(&dist, NULL, NULL); /* under mpirun/srun: this rank of the job */
    if (resume) /* a pretraining checkpoint is named as such before any key of its config is */
        run_require_resumable(resume, "fine-tuning");
    StoredConfig stored = {0};
    const char *config_path = args.num_positional ? args.positional[0] : NULL;
    if (!config_path) { /* --resume RUN_DIR alone: the run's own configuration */
        run_stored_config(&stored, resume, args.num_sets, args.sets);
        config_path = stored.path;
    }
    TaskRunner r;
    task_runner_setup(&r, config_path, stored.ini, stored.ini ? stored.num_sets : args.num_sets,
                      stored.ini ? stored.sets : args.sets);
    dist_set_threads(&dist, r.cfg.train.threads);
    const TaskConfig *task = &r.cfg.task;
    RP_CHECK(task->init_checkpoint[0] || resume, "%s: key 'task.init_checkpoint': expected the checkpoint to start from, got "
             "nothing", config_path);
    RP_CHECK(task->train_file[0], "%s: key 'task.train_file': expected a training file, got nothing", config_path);
    int fresh = task_from_scratch(task) && !resume; /* a new model: no checkpoint to start from */
    char init_key[CONFIG_ORIGIN_MAX + 64]; /* "FILE:LINE: key 'task.init_checkpoint'" in its errors */
    const char *init_origin = config_key_origin(&config_schema, &r.cfg,
                                                config_key_index(&config_schema, "task", "init_checkpoint"));
    snprintf(init_key, sizeof init_key, "%s%skey 'task.init_checkpoint'", init_origin, init_origin[0] ? ": " : "");
    CheckpointFile init;
    if (!fresh && !resume) {
        checkpoint_file_open_as(&init, task->init_checkpoint, init_key);
        if (task->type == TASK_TAGGING && !task->tag_labels[0] && init.heads.num_labels &&
            init.cfg.task.type == TASK_TAGGING) { /* its classifier's rows, in their order */
            snprintf(r.cfg.task.tag_labels, sizeof r.cfg.task.tag_labels, "%s", init.cfg.task.tag_labels);
            rp_log("task.tag_labels: the labels of %s's classifier, in its order: %s", task->init_checkpoint,
                   task->tag_labels);
        }
    }
    if (fresh || task->type == TASK_TAGGING)
        tagging_prepare(&r, fresh); /* the label set, the training lengths, a fresh model's vocabulary */
    RunStart start = {"fine-tuning", resume, overwrite,
                      {{config_path, "the config"}, {task_from_scratch(task) ? "" : task->init_checkpoint,
                                                     "key 'task.init_checkpoint'"},
                       {task->train_file, "key 'task.train_file'"}, {task->dev_file, "key 'task.dev_file'"},
                       {task->test_file, "key 'task.test_file'"}, {fresh ? r.cfg.data.vocab : "", "key 'data.vocab'"}},
                      6, verbose};
    if (fresh) {
        config_report_job(&r.cfg);
    } else if (!resume) { /* keys that would have no effect are refused before the run directory is claimed, on the
                      configuration as the init checkpoint's model makes it (a resume checks its own below) */
        task_runner_check_classifier(&r, &init, init_key);
        Config *merged = xmalloc(sizeof *merged);
        *merged = r.cfg;
        config_adopt_model(merged, &init.cfg, task->init_checkpoint);
        config_report_job(merged);
        free(merged);
        checkpoint_file_close(&init);
    }
    /* The evaluation files exist before the run directory is claimed (they are read after it). */
    if (task->dev_file[0])
        require_regular_file(task->dev_file, "key 'task.dev_file'");
    if (task->test_file[0])
        require_regular_file(task->test_file, "key 'task.test_file'");
    Run run;
    run_begin(&run, &r.cfg, config_path, &dist, &start);
    /* A resumed run builds its model from its own checkpoint (the init checkpoint may be gone). */
    CheckpointFile init_file;
    if (!run.resume && !fresh)
        checkpoint_file_open_as(&init_file, task->init_checkpoint, init_key);
    char *table = NULL; /* what happened to each parameter: RUN_DIR/parameters.txt (rank 0) */
    size_t table_size = 0;
    FILE *table_out = dist_is_root(&dist) && !run.resume ? open_memstream(&table, &table_size) : NULL;
    TransferSummary moved = fresh ? task_runner_build_fresh(&r, table_out)
                                  : task_runner_build_model(&r, run.resume ? run.resume : &init_file,
                                                            run.resume != NULL, table_out);
    if (!run.resume && !fresh)
        checkpoint_file_close(&init_file);
    RP_CHECK(!table_out || fclose(table_out) == 0, "out of memory writing the parameter table");
    if (run.resume)
        config_report_job(&r.cfg);
    run_check_resume(&run);
    char *config_ini = config_to_ini(&r.cfg);
    TaskData train_data, dev_data, test_data;
    task_data_load(&train_data, task, &r.layout, r.tok, r.L, task->train_file, 1);
    RP_CHECK(train_data.features.count > 0, "%s (key 'task.train_file'): no example left to train on: every one was "
             "refused (the messages above say why)", task->train_file);
    if (task->dev_file[0])
        task_data_load(&dev_data, task, &r.layout, r.tok, r.L, task->dev_file, 0);
    if (task->test_file[0])
        task_data_load(&test_data, task, &r.layout, r.tok, r.L, task->test_file, 0);
    if (dist_is_root(&dist)) {
        char data[3 * CONFIG_PATH_MAX], parameters[CONFIG_PATH_MAX + 128];
        snprintf(data, sizeof data, "%s (%d sequences%s%s), %s %s", task->train_file, train_data.features.count,
                 task->dev_file[0] ? "; dev " : "", task->dev_file, task->glue_task != GLUE_NONE ?
                 glue_task_name(task->glue_task) : task_kind_name(task->type), task->padding == PAD_NONE ? "batches unpadded (task.padding = none)" :
                 task->padding == PAD_LONGEST ? "padded per batch to its longest" : "padded to task.max_seq_len");
        snprintf(parameters, sizeof parameters, "%d loaded, %d grown, %d initialised, %d dropped from %s",
                 moved.loaded, moved.grown, moved.initialised, moved.dropped, task->init_checkpoint);
        int warmup;
        long steps = finetune_steps(&r.cfg, train_data.features.count, &warmup, NULL);
        LaunchFacts facts = {data, steps, warmup, task->batch_size, task->lr, "linear", table ? parameters : NULL};
        launch_report(stderr, &r.cfg, "fine-tuning", &facts, config_ini, verbose);
        if (table) /* the data read: the run is accepted, its directory gets its first files */
            launch_write_parameters(stderr, run.dir.path, table, verbose);
        if (fresh && !r.cfg.data.vocab[0]) { /* the vocabulary built from the training file */
            char vocab_path[CONFIG_PATH_MAX + 16];
            snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", run.dir.path);
            write_file(vocab_path, r.vocab_text, strlen(r.vocab_text));
            rp_log("the vocabulary built from %s: %s", task->train_file, vocab_path);
        }
    }
    free(table);
    task_runner_buffers(&r);
    int rc = finetune(&run, config_ini, &r, &train_data, task->dev_file[0] ? &dev_data : NULL,
                      task->test_file[0] ? &test_data : NULL);
    run_end(&run);
    if (task->dev_file[0])
        task_data_free(&dev_data);
    if (task->test_file[0])
        task_data_free(&test_data);
    task_data_free(&train_data);
    task_runner_free(&r);
    free(config_ini);
    run_stored_config_free(&stored);
    dist_finalize(&dist);
    return rc;
}

/* predict reads data as the model was fine-tuned: the checkpoint's [task] keys that define the
 * inputs (type, columns, labels, lengths, SQuAD windows) and the batches (batch_size: with some
 * BLAS kernels a row's last bits depend on the rows it is multiplied with, so the dev predictions
 * are reproduced bit for bit only from the same batches), except those given with --set; keys of
 * CONFIG.ini that differ are reported and not used. */
static void adopt_task(TaskRunner *r, const Config *stored, const char *ckpt) {
    static const char *const input_keys[] = {"type", "glue_task", "text_a_column", "text_b_column", "label_column",
                                             "num_columns", "header", "labels", "max_seq_len", "batch_size", "doc_stride",
                                             "max_query_length", "n_best_size", "max_answer_length",
                                             "tag_labels", "train_max_length"};
    config_adopt_keys(&r->cfg, stored, "task", input_keys, sizeof input_keys / sizeof *input_keys, ckpt,
                      "predict uses the checkpoint's fine-tuning setting (override it with --set)");
    task_runner_derive(r);
}

int cmd_predict(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *ckpt = NULL, *input = NULL, *out = NULL;
    CliOption options[] = {{"checkpoint", &ckpt}, {"input", &input}, {"out", &out}};
    CliArgs args = cli_parse(argc, argv, options, 3);
    RP_CHECK(args.num_positional == 1 && ckpt && input && out, "usage: realpos %s", usage);
    char ckpt_file[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest */
    checkpoint_resolve(ckpt, "--checkpoint", ckpt_file, sizeof ckpt_file);
    ckpt = ckpt_file;
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, args.positional[0], "the config");
    io_plan_input(&plan, ckpt, "--checkpoint");
    io_plan_input(&plan, input, "--input");
    io_plan_output(&plan, out, "--out");
    char nbest[4096]; /* SQuAD: the n best answers beside --out */
    squad_nbest_path(nbest, sizeof nbest, out);
    io_plan_output(&plan, nbest, "the n-best answers beside --out");
    io_plan_check(&plan);
    TaskRunner r;
    task_runner_setup(&r, args.positional[0], NULL, args.num_sets, args.sets);
    CheckpointFile c;
    checkpoint_file_open(&c, ckpt);
    adopt_task(&r, &c.cfg, ckpt);
    task_runner_check_classifier(&r, &c, "--checkpoint"); /* a --set label set must keep the rows' meaning */
    r.cfg.model = c.cfg.model; /* the checkpoint defines the model */
    r.cfg.data = c.cfg.data;
    ModelHeads heads = c.heads, want = task_runner_heads(&r);
    RP_CHECK(heads.span == want.span && heads.num_labels == want.num_labels && !heads.mlm &&
                 heads.pooler == want.pooler,
             "%s: its heads (%s%s, %d classifier outputs) do not fit task.type = %s with %d outputs; predict needs a "
             "checkpoint written by `realpos finetune` for this task", ckpt, heads.mlm ? "MLM, " : "",
             heads.span ? "span" : "no span", heads.num_labels, task_kind_name(r.cfg.task.type), want.num_labels);
    RP_CHECK(!r.cfg.model.absolute_position || r.L <= r.cfg.model.max_position,
             "task.max_seq_len %d exceeds the checkpoint's model.max_position = %d (absolute positions)", r.L,
             r.cfg.model.max_position);
    task_runner_load_vocab(&r, c.file, ckpt, &c.cfg);
    checkpoint_file_model(&c, &r.model, 1);
    checkpoint_file_close(&c);
    TaskData data;
    task_data_load(&data, &r.cfg.task, &r.layout, r.tok, r.L, input, 0);
    task_runner_buffers(&r);
    task_predict(&r, &data, out, NULL, -1);
    task_data_free(&data);
    task_runner_free(&r);
    return 0;
}
