/* Thin HDF5 helpers. Every failure is fatal and names the file and the dataset or attribute.
 * Dataset names are paths ("model/bert/..."); writing creates intermediate groups. */
#pragma once
#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "core/io/h5seal.h" /* the seal every file realpos writes carries: h5_open checks it */
#include "core/param_table.h"


/* Create (truncating) or open read-only / read-write. HDF5's own error printing is silenced;
 * our messages replace it. h5_open refuses a file whose checksum is absent or wrong. */
hid_t h5_create(const char *path);
hid_t h5_open(const char *path, int writable);
/* Close; a file opened for writing is then sealed (checksum written, fsynced). A failure while
 * writing removes the incomplete file and exits non-zero with the reason (e.g. disk full). */
void h5_close(hid_t file, const char *path);

/* A file written whole or not at all: h5_create_temp creates PATH.tmp.PID (tmp receives its
 * name), h5_commit closes and seals it, renames it onto path and fsyncs the directory (as
 * core/io/atomic_file.h); every failure removes the temporary file and names the reason. */
hid_t h5_create_temp(const char *path, char *tmp, size_t tmp_size);
void h5_commit(hid_t file, const char *tmp, const char *path);

/* Open read-only a file whose whole seal the caller has just verified (h5_check_seal_fd on a
 * descriptor of this same file): h5_open without its second full read. */
hid_t h5_open_verified(const char *path);
/* The operating system's or HDF5's reason for the last HDF5 failure. */
void h5_error_reason(char *out, size_t size);
/* Fatal write failure on the file holding obj: removes the file, names it, what and the reason. */
_Noreturn void h5_write_failed(hid_t obj, const char *what, const char *name);

int h5_exists(hid_t file, const char *name);

void h5_write_floats(hid_t file, const char *name, const float *data, int rank, const hsize_t *dims);
void h5_write_ints(hid_t file, const char *name, const int32_t *data, int rank, const hsize_t *dims);
void h5_write_int64s(hid_t file, const char *name, const int64_t *data, int rank, const hsize_t *dims);
void h5_write_uint64s(hid_t file, const char *name, const uint64_t *data, hsize_t count);
void h5_write_double(hid_t file, const char *name, double value);
void h5_write_doubles(hid_t file, const char *name, const double *data, hsize_t count);
void h5_write_string(hid_t file, const char *name, const char *text);

void h5_attr_write_string(hid_t obj, const char *attr, const char *value);
void h5_attr_write_int64(hid_t obj, const char *attr, int64_t value);
/* Returns a malloc'd string; fatal (naming path) if absent. */
char *h5_attr_read_string(hid_t obj, const char *attr, const char *path);
int64_t h5_attr_read_int64(hid_t obj, const char *attr, const char *path);
int h5_attr_exists(hid_t obj, const char *attr);

/* Shape of a dataset: returns its rank (<= 4) and fills dims; fatal if absent. */
int h5_shape(hid_t file, const char *path, const char *name, hsize_t dims[4]);
/* "[2, 3]" (rank 0: "[]") for messages: the one shape formatter. */
void h5_shape_text(char *buf, size_t size, int rank, const hsize_t *dims);
/* The shape of a parameter tensor: [rows, cols], or [rows] for a vector; returns the rank. */
int h5_param_dims(const ParamInfo *p, hsize_t dims[2]);
/* Read a dataset after checking presence, element type and exact shape; fatal on the first
 * mismatch, naming the file, the dataset, what was expected and what was found. */
void h5_read_floats(hid_t file, const char *path, const char *name, float *out, int rank,
                    const hsize_t *dims);
void h5_read_ints(hid_t file, const char *path, const char *name, int32_t *out, int rank,
                  const hsize_t *dims);
void h5_read_int64s(hid_t file, const char *path, const char *name, int64_t *out, int rank,
                    const hsize_t *dims);
void h5_read_uint64s(hid_t file, const char *path, const char *name, uint64_t *out, hsize_t count);
void h5_read_doubles(hid_t file, const char *path, const char *name, double *out, hsize_t count);
double h5_read_double(hid_t file, const char *path, const char *name);
char *h5_read_string(hid_t file, const char *path, const char *name);
