/* The kinds a configuration chooses among (train/config/config.h), named here, below every floor
 * that acts on them, so that the config and everything that reads it name a kind without seeing
 * the layers, the optimizer or the product interface. Each kind's config names and its meaning
 * stay with its owner: Precision with core/gemm.h, NormKind with layers/encoder.h, RelKind with
 * layers/positions.h (one row per value), ScheduleKind with optim/adamw.h. */
#pragma once

/* Precision of the matrix products: fp32 everywhere, or bf16 products with fp32 accumulation. */
typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } Precision;

/* Where the layer norms sit: after each residual sum (post, BERT) or before each branch (pre). */
typedef enum { NORM_POST = 0, NORM_PRE = 1 } NormKind;

/* Position schemes, the values of model.relative_position: Shaw et al. 2018, Huang et al. 2020's
 * methods, T5, ALiBi, RoPE (layers/positions.h: one row each, in this order). */
typedef enum {
    REL_NONE = 0, REL_SHAW, REL_METHOD1, REL_METHOD2, REL_METHOD3, REL_METHOD4,
    REL_T5, REL_ALIBI, REL_ROPE /* T5 buckets, ALiBi (Press et al. 2022), RoPE (Su et al. 2021) */
} RelKind;

/* Learning-rate schedules after warmup (optim/adamw.h: lr_schedule). */
typedef enum { SCHED_LINEAR = 0, SCHED_COSINE, SCHED_CONSTANT } ScheduleKind;
