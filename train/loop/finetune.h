/* Fine-tuning (GLUE classification/regression, SQuAD spans) as a task of the run (run.h). The
 * command is train/cli/cmd_finetune.c; the task's model and data are train/tasks/task_runner.h. */
#pragma once
#include "train/loop/run.h"
#include "train/tasks/task_runner.h"

/* Fine-tune r's model (built from task.init_checkpoint, or from run->resume) on train_data in
 * the run's directory (config.ini, metrics files, rotating checkpoints, best.h5, model.h5),
 * scoring dev_data (may be NULL) every task.eval_every steps and at the end. Returns the exit
 * status. */
int finetune(Run *run, const char *config_ini, TaskRunner *r, const TaskData *train_data, TaskData *dev_data);
