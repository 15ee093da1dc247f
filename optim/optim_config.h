/* The [optim] section of the configuration as AdamW takes it (optim/adamw.h), a header of its
 * own so that the config (train/config/config.h) holds it without seeing the optimizer. */
#pragma once

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int bias_correction; /* bool */
} OptimConfig;
