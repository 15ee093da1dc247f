/* realpos finetune / predict: arguments, the task's model and data; the loop is train/loop/finetune.c. */
#include <string.h>

#include "core/cli.h"
#include "core/common.h"
#include "core/h5io.h"
#include "train/cli/commands.h"
#include "train/loop/finetune.h"
#include "train/model/checkpoint.h"

int cmd_finetune(int argc, char **argv) {
    const char *usage = "finetune CONFIG.ini [--set section.key=value ...] [--resume CKPT]";
    const char *resume = NULL;
    CliOption options[] = {{"resume", &resume}};
    CliArgs args = cli_parse(argc, argv, options, 1);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", usage);
    Dist dist;
    dist_init(&dist, NULL, NULL); /* under mpirun/srun: this rank of the job */
    TaskRunner r;
    task_runner_setup(&r, args.positional[0], &args);
    dist_set_threads(&dist, r.cfg.train.threads);
    const TaskConfig *task = &r.cfg.task;
    RP_CHECK(task->init_checkpoint[0] || resume, "%s: key 'task.init_checkpoint': expected the checkpoint to start from, got "
             "nothing", args.positional[0]);
    RP_CHECK(task->train_file[0], "%s: key 'task.train_file': expected a training file, got nothing",
             args.positional[0]);
    char model_path[CONFIG_PATH_MAX + 16];
    snprintf(model_path, sizeof model_path, "%s/model.h5", r.cfg.train.run_dir);
    require_distinct_files(task->init_checkpoint, "finetune: task.init_checkpoint", model_path,
                           "the fine-tuned checkpoint (train.run_dir/model.h5)");
    /* A resumed run builds its model from its own checkpoint (the init checkpoint may be gone). */
    task_runner_build_model(&r, resume ? resume : task->init_checkpoint);
    char *config_ini = config_to_ini(&r.cfg);
    dist_require_same_text(&dist, config_ini, "effective configuration");
    if (dist_is_root(&dist))
        fprintf(stderr, "# effective configuration\n%s\n", config_ini);
    TaskData train_data, dev_data;
    task_data_load(&train_data, task, &r.layout, r.tok, r.L, task->train_file, 1);
    if (task->dev_file[0])
        task_data_load(&dev_data, task, &r.layout, r.tok, r.L, task->dev_file, 0);
    task_runner_buffers(&r);

    FinetuneOptions opt = {config_ini, resume, &dist};
    finetune_run(&r, &train_data, task->dev_file[0] ? &dev_data : NULL, &opt);
    if (task->dev_file[0])
        task_data_free(&dev_data);
    task_data_free(&train_data);
    task_runner_free(&r);
    free(config_ini);
    dist_finalize(&dist);
    return 0;
}

/* predict reads data as the model was fine-tuned: the checkpoint's [task] keys that define the
 * inputs (type, columns, labels, lengths, SQuAD windows), except those given with --set; keys of
 * CONFIG.ini that differ are reported and not used. */
static void adopt_task(TaskRunner *r, const Config *stored, const char *ckpt) {
    static const char *const input_keys[] = {"type", "glue_task", "text_a_column", "text_b_column", "label_column",
                                             "num_columns", "header", "labels", "max_seq_len", "doc_stride",
                                             "max_query_length", "n_best_size", "max_answer_length"};
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
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, args.positional[0], "the config");
    io_plan_input(&plan, ckpt, "--checkpoint");
    io_plan_input(&plan, input, "--input");
    io_plan_output(&plan, out, "--out");
    io_plan_check(&plan);
    TaskRunner r;
    task_runner_setup(&r, args.positional[0], &args);
    char *stored_ini;
    hid_t f = checkpoint_open(ckpt, &stored_ini);
    Config stored;
    config_load_string(&stored, stored_ini, ckpt);
    adopt_task(&r, &stored, ckpt);
    r.cfg.model = stored.model; /* the checkpoint defines the model */
    r.cfg.data = stored.data;
    ModelHeads heads = checkpoint_heads(f, ckpt), want = task_runner_heads(&r);
    RP_CHECK(heads.span == want.span && heads.num_labels == want.num_labels && !heads.mlm,
             "%s: its heads (%s%s, %d classifier outputs) do not fit task.type = %s with %d outputs; predict needs a "
             "checkpoint written by `realpos finetune` for this task", ckpt, heads.mlm ? "MLM, " : "",
             heads.span ? "span" : "no span", heads.num_labels, task_kind_name(r.cfg.task.type), want.num_labels);
    RP_CHECK(!r.cfg.model.absolute_position || r.L <= r.cfg.model.max_position,
             "task.max_seq_len %d exceeds the checkpoint's model.max_position = %d (absolute positions)", r.L,
             r.cfg.model.max_position);
    task_runner_load_vocab(&r, f, ckpt, &stored);
    model_create(&r.model, &r.cfg.model, heads);
    checkpoint_load_model(f, ckpt, &r.model);
    h5_close(f, ckpt);
    free(stored_ini);
    TaskData data;
    task_data_load(&data, &r.cfg.task, &r.layout, r.tok, r.L, input, 0);
    task_runner_buffers(&r);
    task_predict(&r, &data, out, NULL, -1);
    task_data_free(&data);
    task_runner_free(&r);
    return 0;
}
