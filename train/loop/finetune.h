/* Fine-tuning (GLUE classification/regression, SQuAD spans) as a task of the run (run.h). The
 * command is train/cli/cmd_finetune.c; the task's model and data are train/tasks/task_runner.h. */
#pragma once
#include "train/loop/run.h"
#include "train/tasks/task_runner.h"
#include "train/tasks/task_sampler.h"

/* Fine-tune r's model (built from task.init_checkpoint, or from run->resume) on train_data in
 * the run's directory (config.ini, metrics files, rotating checkpoints, best.h5, model.h5),
 * scoring dev_data (may be NULL) every task.eval_every steps and at the end. Returns the exit
 * status. */
int finetune(Run *run, const char *config_ini, TaskRunner *r, const TaskData *train_data, TaskData *dev_data,
             TaskData *test_data);
/* The run's optimizer steps, ceil(task.epochs x sequences / (task.batch_size x train.grad_accum_steps))
 * capped at task.max_steps when it is not 0, and its warm-up steps (task.warmup_proportion of them);
 * epoch_steps (may be NULL) receives the steps before the cap. */
long finetune_steps(const Config *cfg, int sequences, int *warmup, long *epoch_steps);

/* Fine-tuning's training batches, as finetune() draws them and as `realpos bench --lengths-from`
 * times them: the TaskSampler's stream over train_set (seed task.seed, batches of task.batch_size,
 * task.group_by_length), each micro-batch filled by task_fill_batch (padded per task.padding) with
 * its targets and its real (attention_mask = 1) token count. r and train_set must outlive it. */
typedef struct {
    TaskRunner *r;
    const TaskFeatures *train_set;
    TaskSampler sampler;
} FinetuneBatches;

void finetune_batches_create(FinetuneBatches *fb, TaskRunner *r, const TaskFeatures *train_set);
void finetune_batches_free(FinetuneBatches *fb);
/* The BatchSource over fb (next: the next batch; skip: the sampler moves on, nothing is built). */
BatchSource finetune_batch_source(FinetuneBatches *fb);
/* The task's loss over r's model and buffers: span (SQuAD), MSE (regression) or cross-entropy. */
LossHead finetune_loss_head(TaskRunner *r);
