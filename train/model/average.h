/* Checkpoint averaging (RealFormer evaluates its models with the mean of several checkpoints'
 * weights): every parameter is the mean of the inputs' values, accumulated in double and rounded
 * to float32 once. The inputs must describe the same model: the same [model] config (dropout
 * rates aside: they change neither the parameters nor inference) and the same datasets with the
 * same shapes under /model, the same vocabulary and casing, and for classifiers the same labels in
 * the same order; the first difference is fatal, naming both files, the key, dataset or vocabulary
 * line and both values or shapes. */
#pragma once
#include <hdf5.h>

#include "train/model/model.h"

typedef struct {
    Model model;      /* created from the first input's config and heads; params = the mean */
    char *config_ini; /* the first input's stored config text */
    long *steps;      /* [count] each input's step (checkpoint_step) */
    int count;
} CheckpointAverage;

void checkpoint_average(CheckpointAverage *avg, const char *const *paths, int count);
void checkpoint_average_free(CheckpointAverage *avg);

/* Optimizer updates behind a checkpoint: /train/step (pretraining), else the /optimizer group's
 * step attribute, else -1 (a weights-only checkpoint). */
long checkpoint_step(hid_t file, const char *path);
