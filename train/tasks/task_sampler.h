/* The order of fine-tuning's training sequences: a stream of batches of B drawn from a fresh
 * permutation each epoch, a pure function of (seed, epoch) whose state is three checkpoint
 * datasets, so `--resume` continues exactly.
 *
 * Each epoch starts with a Fisher-Yates shuffle of the previous epoch's order (the first of the
 * identity), drawn from an Rng seeded by task.seed. The stream runs on across epochs: a batch may
 * end one epoch and begin the next.
 *
 * group_by_length (task.group_by_length, as HuggingFace's LengthGroupedSampler): after the shuffle,
 * the epoch's order is cut, from the first position that starts a batch, into chunks of
 * TASK_GROUP_BATCHES batches; each chunk is sorted by length (longest first, ties in shuffled
 * order), so its batches hold sequences of similar lengths; then the whole batches of the epoch are
 * shuffled (Fisher-Yates, same Rng), so long and short batches alternate at random. The rows that
 * finish the batch the previous epoch began, and the epoch's last partial batch, stay in place.
 *
 * Checkpoint datasets (train/tasks/task_sampler.c writes and checks them):
 *   /train/sampler_order   int32 [count]  the epoch's order
 *   /train/sampler_state   uint64 [5]     position in it, then the Rng's 4 state words */
#pragma once
#include <hdf5.h>

#include "core/rng.h"
#include "train/tasks/task_data.h"

/* Batches per length-sorted chunk (HuggingFace's megabatch of 50 batches). */
#define TASK_GROUP_BATCHES 50

typedef struct {
    int count;          /* training sequences */
    int *order;         /* [count] this epoch's order */
    int next;           /* position in order of the next sequence */
    Rng rng;
    int batch_size;     /* rows per batch: every call of task_sampler_next draws this many */
    const int *lengths; /* [count] tokens per sequence (group_by_length), else NULL */
    int *scratch;       /* [2 count] group_by_length: sorting and batch shuffling */
} TaskSampler;

/* The sampler of f's sequences (f must outlive it), before the first epoch. */
void task_sampler_create(TaskSampler *s, const TaskFeatures *f, uint64_t seed, int batch_size, int group_by_length);
void task_sampler_free(TaskSampler *s);
/* The next batch_size sequence indices. */
void task_sampler_next(TaskSampler *s, int *rows);
/* Write the two datasets; read them back into a sampler created alike (fatal, naming `path` and
 * the dataset, unless the order is a permutation of count and the position below count). */
void task_sampler_save(const TaskSampler *s, hid_t file);
void task_sampler_load(TaskSampler *s, hid_t file, const char *path);
