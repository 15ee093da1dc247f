/* What a training run keeps in its directory (train.run_dir), shared by pretraining and
 * fine-tuning: config.ini, numbered checkpoints ckpt-NNNNNNN.h5 of which the newest keep_last stay,
 * and `latest` naming the newest; plus the SIGINT/SIGTERM flag that makes a loop save and stop. */
#pragma once
#include <stddef.h>

#include "train/model/checkpoint.h"

/* Create the directory and write RUN_DIR/config.ini. */
void run_dir_open(const char *run_dir, const char *config_ini);
/* RUN_DIR/ckpt-NNNNNNN.h5 of a step into out. */
void run_dir_checkpoint_name(char *out, size_t size, const char *run_dir, long step);
/* Save the step's checkpoint (temp + rename), then point RUN_DIR/latest at it (temp + rename),
 * then delete all but the newest keep_last: a kill at any moment leaves `latest` naming a
 * complete checkpoint that exists. */
void run_dir_save_checkpoint(const char *run_dir, long step, int keep_last, const Model *m,
                             const CheckpointExtras *extras);

/* Install the SIGINT/SIGTERM/SIGUSR1 handler; stop_signal_received() then returns the signal number once
 * one arrived (0 before). Loops poll it between steps. */
void stop_signals_install(void);
int stop_signal_received(void);
