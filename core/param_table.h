/* Names, shapes and offsets of the tensors in a parameter-shaped block (parameters, gradients,
 * optimizer moments all share one layout). */
#pragma once
#include <stddef.h>

#define PARAM_NAME_MAX 96

typedef struct {
    char name[PARAM_NAME_MAX]; /* HuggingFace state_dict key with '.' -> '/' */
    int rows, cols;            /* cols == 0 for vectors */
    size_t offset, count;      /* in floats, within the block */
    int decay;                 /* AdamW weight decay applies (not LayerNorm, not biases) */
} ParamInfo;

typedef struct {
    ParamInfo *items;
    int count;
    size_t block_floats; /* size of one block, alignment padding included */
} ParamTable;
