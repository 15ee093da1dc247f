/* The fine-tuning loop behind `realpos finetune` (the command is train/cli/cmd_finetune.c; the
 * task's model and data are train/tasks/task_runner.h). */
#pragma once
#include "train/loop/step.h"
#include "train/tasks/task_runner.h"

typedef struct {
    const char *config_ini; /* the effective configuration, stored in every checkpoint */
    const char *resume;     /* a checkpoint of the same run to continue from, or NULL */
    Dist *dist;             /* the MPI job (size 1 alone): ranks share each step's micro-batches */
} FinetuneOptions;

/* Fine-tune r's model on train_data in train.run_dir (config.ini, metrics files, rotating
 * checkpoints, best.h5, model.h5), scoring dev_data (may be NULL) every task.eval_every steps and
 * at the end. SIGINT/SIGTERM save a checkpoint and return. */
void finetune_run(TaskRunner *r, const TaskData *train_data, TaskData *dev_data, const FinetuneOptions *opt);
