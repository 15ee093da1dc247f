/* The safetensors file format (knows no model):
 *   8 bytes   N, little-endian uint64: the header's length
 *   N bytes   JSON header {"NAME": {"dtype": "F32", "shape": [d0, ...], "data_offsets": [b, e]},
 *             ..., "__metadata__": {"key": "string", ...}} (optionally padded with spaces)
 *   the data buffer: tensor NAME is bytes [b, e) of it, row-major, little-endian.
 * The header is untrusted input. st_open checks everything before any tensor is read: N against
 * the file size, the JSON, every dtype, shape (non-negative integers, element count and byte size
 * without overflow) and offset pair (e - b = elements x dtype size; all tensors together tile the
 * buffer exactly, without overlap or hole, as the format's specification requires), names unique.
 * Any violation is fatal, naming the file and the tensor. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ST_MAX_RANK 8

typedef struct {
    char *name;
    char dtype[8];            /* "F32", "F16", "BF16", "I64", ... */
    int elem_size;            /* bytes */
    int rank;
    uint64_t shape[ST_MAX_RANK];
    uint64_t numel;
    uint64_t begin, end;      /* byte range within the data buffer */
} StTensor;

typedef struct {
    char *path;
    FILE *file;
    uint64_t file_size, data_start; /* data_start = 8 + N */
    StTensor *tensors;              /* in header order */
    int count;
} StFile;

/* Open and validate; fatal (naming path) on any error. */
void st_open(StFile *st, const char *path);
void st_close(StFile *st);
/* The tensor of that name, or NULL. */
const StTensor *st_find(const StFile *st, const char *name);
/* Read a tensor as float32: F32 as stored, F16 and BF16 converted exactly. Fatal for any other
 * dtype (naming the tensor and its dtype) or a read error. `out` holds t->numel floats. */
void st_read_floats(const StFile *st, const StTensor *t, float *out);

/* IEEE half and bfloat16 bit patterns to float (every value is exactly representable). */
float st_f16_to_float(uint16_t bits);
float st_bf16_to_float(uint16_t bits);

typedef struct {
    const char *name;
    int rank;
    uint64_t shape[ST_MAX_RANK];
    const float *data; /* numel floats */
} StWriteTensor;

/* Write F32 tensors (in the given order) with string metadata pairs meta[2i] = meta[2i+1],
 * whole or not at all (core/io/atomic_file.h). Returns 0, or -1 with the reason in why. */
int st_write_floats(const char *path, const StWriteTensor *tensors, int count, const char *const *meta,
                    int num_meta, char *why, size_t why_size);
