/* The fine-tuning loop behind `realpos finetune` (the command is train/cli/cmd_finetune.c; the
 * task's model and data are train/tasks/task_runner.h). */
#pragma once
#include "train/tasks/task_runner.h"

/* Fine-tune r's model on train_data in train.run_dir (config.ini, metrics files, model.h5), then
 * predict dev_data (may be NULL) with its metrics. */
void finetune_run(TaskRunner *r, const TaskData *train_data, TaskData *dev_data, const char *config_ini);
