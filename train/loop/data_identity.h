/* The training data a checkpoint was trained on, kept in it (/train/data_identity, the task's
 * RunTask.data_identity: for pretraining the shard set's sources with sizes, mtimes, counts and
 * content digests, for fine-tuning task.train_file's size and CRC-32), so that a resume that
 * would continue on other data is refused, saying what changed. */
#pragma once
#include <hdf5.h>

void data_identity_write(hid_t file, const char *identity);
/* Fatal if the checkpoint at path (open as file) records other data than identity, listing the
 * lines that differ on each side; a checkpoint of an older realpos (no record) is logged. */
void data_identity_check(hid_t file, const char *path, const char *identity);
