#define _POSIX_C_SOURCE 200809L
#include "core/io/h5io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/io/atomic_file.h"
#include "core/common.h"
#include "core/io/paths.h"

typedef struct {
    char *out;
    size_t size;
} ErrorReason;

/* Error-stack walker: keep the operating system's reason ("error message = 'No space left on
 * device'") when a record has one, else the innermost description. */
static herr_t take_reason(unsigned n, const H5E_error2_t *e, void *data) {
    ErrorReason *r = data;
    const char *os = e->desc ? strstr(e->desc, "error message = '") : NULL;
    if (os) {
        os += strlen("error message = '");
        snprintf(r->out, r->size, "%.*s", (int)strcspn(os, "'"), os);
        return 1; /* stop: the best reason there is */
    }
    if (n == 0 && e->desc)
        snprintf(r->out, r->size, "%s", e->desc);
    return 0;
}

void h5_error_reason(char *out, size_t size) {
    snprintf(out, size, "unknown HDF5 error");
    ErrorReason r = {out, size};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, take_reason, &r);
}

void h5_write_failed(hid_t obj, const char *what, const char *name) {
    char reason[256], path[4096] = "?";
    h5_error_reason(reason, sizeof reason);
    hid_t file = H5Iget_file_id(obj);
    if (file >= 0)
        H5Fget_name(file, path, sizeof path);
    /* Remove the incomplete file and exit without running HDF5's exit handler, which would try
     * to flush it again (and crashed doing so on a full disk); the kernel closes the descriptor. */
    int removed = unlink(path) == 0;
    fflush(NULL);
    fprintf(stderr, "realpos: error: %s: cannot write %s '%s': %s%s\n", path, what, name, reason,
            removed ? "; removed the incomplete file" : "");
    _exit(1);
}

hid_t h5_create(const char *path) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_userblock(fcpl, H5_USER_BLOCK);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    int existed = access(path, F_OK) == 0;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    char reason[256];
    h5_error_reason(reason, sizeof reason); /* before the next call clears the error stack */
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (f < 0 && !existed)
        unlink(path); /* HDF5 may have created the file before failing (a full disk) */
    RP_CHECK(f >= 0, "%s: cannot create HDF5 file: %s%s", path, reason, existed ? "" : "; removed it");
    return f;
}

static hid_t open_checked(const char *path, int writable) {
    RP_CHECK(H5Fis_hdf5(path) > 0, "%s: not a readable HDF5 file (truncated or wrong format)",
             path);
    hid_t f = H5Fopen(path, writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
    RP_CHECK(f >= 0, "%s: cannot open HDF5 file (truncated or corrupt)", path);
    return f;
}

hid_t h5_open(const char *path, int writable) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    RP_CHECK(access(path, F_OK) == 0 || errno != ENOENT, "%s: no such file", path);
    require_regular_file(path, "HDF5 file");
    char why[256];
    H5SealStatus seal = h5_check_seal(path, why, sizeof why);
    RP_CHECK(seal != H5_SEAL_ABSENT,
             "%s: %s, so it cannot be verified before HDF5 reads it (written by an older realpos or "
             "another tool); if you trust it, add the checksum with `/usr/bin/python3 scripts/h5seal.py %s`",
             path, why, path);
    RP_CHECK(seal == H5_SEAL_OK, "%s: %s", path, why);
    return open_checked(path, writable);
}

hid_t h5_open_verified(const char *path) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return open_checked(path, 0);
}

void h5_close(hid_t file, const char *path) {
    unsigned intent = 0;
    int written = H5Fget_intent(file, &intent) >= 0 && (intent & H5F_ACC_RDWR);
    if (written && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0)
        h5_write_failed(file, "file", path);
    if (H5Fclose(file) < 0) {
        RP_CHECK(written, "%s: error closing HDF5 file", path);
        char reason[256];
        h5_error_reason(reason, sizeof reason);
        unlink(path);
        fflush(NULL);
        fprintf(stderr, "realpos: error: %s: cannot close HDF5 file: %s; removed the incomplete file\n", path,
                reason);
        _exit(1);
    }
    if (written)
        h5_seal(path);
}

hid_t h5_create_temp(const char *path, char *tmp, size_t tmp_size) {
    snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
    return h5_create(tmp);
}

void h5_commit(hid_t file, const char *tmp, const char *path) {
    h5_close(file, tmp); /* checksummed and fsynced; a failure removed tmp */
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        RP_FATAL("%s: cannot rename %s onto it: %s (removed it)", path, tmp, strerror(err));
    }
    sync_directory(path); /* best effort, as atomic_file_commit: the file is complete and in place */
}

int h5_exists(hid_t file, const char *name) {
    /* H5Lexists must be asked for each path component in turn. */
    char partial[512];
    size_t n = strlen(name);
    RP_CHECK(n < sizeof partial, "internal: HDF5 path too long: %s", name);
    for (size_t i = 0; i <= n; i++) {
        if (name[i] != '/' && name[i] != '\0')
            continue;
        if (i == 0)
            continue;
        memcpy(partial, name, i);
        partial[i] = '\0';
        if (H5Lexists(file, partial, H5P_DEFAULT) <= 0)
            return 0;
    }
    return 1;
}

static void write_dataset(hid_t file, const char *name, hid_t type, const void *data, int rank,
                          const hsize_t *dims) {
    hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(file, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (ds < 0 || H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        h5_write_failed(file, "dataset", name);
    H5Dclose(ds);
    H5Pclose(lcpl);
    H5Sclose(space);
}

void h5_write_floats(hid_t f, const char *name, const float *d, int rank, const hsize_t *dims) {
    write_dataset(f, name, H5T_NATIVE_FLOAT, d, rank, dims);
}
void h5_write_ints(hid_t f, const char *name, const int32_t *d, int rank, const hsize_t *dims) {
    write_dataset(f, name, H5T_NATIVE_INT32, d, rank, dims);
}
void h5_write_int64s(hid_t f, const char *name, const int64_t *d, int rank, const hsize_t *dims) {
    write_dataset(f, name, H5T_NATIVE_INT64, d, rank, dims);
}
void h5_write_uint64s(hid_t f, const char *name, const uint64_t *d, hsize_t count) {
    write_dataset(f, name, H5T_NATIVE_UINT64, d, 1, &count);
}
void h5_write_double(hid_t f, const char *name, double value) {
    write_dataset(f, name, H5T_NATIVE_DOUBLE, &value, 0, NULL);
}
void h5_write_doubles(hid_t f, const char *name, const double *d, hsize_t count) {
    write_dataset(f, name, H5T_NATIVE_DOUBLE, d, 1, &count);
}

static hid_t string_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

void h5_write_string(hid_t f, const char *name, const char *text) {
    hid_t t = string_type();
    write_dataset(f, name, t, &text, 0, NULL);
    H5Tclose(t);
}

void h5_attr_write_string(hid_t obj, const char *attr, const char *value) {
    hid_t t = string_type(), space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, attr, t, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, t, &value) < 0)
        h5_write_failed(obj, "attribute", attr);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
}

void h5_attr_write_int64(hid_t obj, const char *attr, int64_t value) {
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, attr, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, H5T_NATIVE_INT64, &value) < 0)
        h5_write_failed(obj, "attribute", attr);
    H5Aclose(a);
    H5Sclose(space);
}

int h5_attr_exists(hid_t obj, const char *attr) { return H5Aexists(obj, attr) > 0; }

/* Read a string held in an attribute or scalar dataset, fixed or variable length. */
static char *read_string_value(hid_t obj, int is_attr, const char *path, const char *name) {
    hid_t type = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    RP_CHECK(H5Tget_class(type) == H5T_STRING, "%s: '%s' is not a string", path, name);
    char *result;
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mem, H5Tget_cset(type));
    if (H5Tis_variable_str(type) > 0) {
        H5Tset_size(mem, H5T_VARIABLE);
        char *value = NULL;
        herr_t rc = is_attr ? H5Aread(obj, mem, &value) : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value);
        RP_CHECK(rc >= 0 && value, "%s: cannot read string '%s'", path, name);
        result = xstrdup(value);
        H5free_memory(value);
    } else {
        size_t size = H5Tget_size(type);
        H5Tset_size(mem, size + 1);
        result = xcalloc(size + 2, 1);
        herr_t rc = is_attr ? H5Aread(obj, mem, result) : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, result);
        RP_CHECK(rc >= 0, "%s: cannot read string '%s'", path, name);
    }
    H5Tclose(mem);
    H5Tclose(type);
    return result;
}

char *h5_attr_read_string(hid_t obj, const char *attr, const char *path) {
    RP_CHECK(h5_attr_exists(obj, attr), "%s: missing attribute '%s'", path, attr);
    hid_t a = H5Aopen(obj, attr, H5P_DEFAULT);
    char *s = read_string_value(a, 1, path, attr);
    H5Aclose(a);
    return s;
}

int64_t h5_attr_read_int64(hid_t obj, const char *attr, const char *path) {
    RP_CHECK(h5_attr_exists(obj, attr), "%s: missing attribute '%s'", path, attr);
    hid_t a = H5Aopen(obj, attr, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    RP_CHECK(H5Tget_class(t) == H5T_INTEGER, "%s: attribute '%s': expected an integer", path, attr);
    int64_t v = 0;
    RP_CHECK(H5Aread(a, H5T_NATIVE_INT64, &v) >= 0, "%s: cannot read attribute '%s'", path, attr);
    H5Tclose(t);
    H5Aclose(a);
    return v;
}

int h5_shape(hid_t file, const char *path, const char *name, hsize_t dims[4]) {
    RP_CHECK(h5_exists(file, name), "%s: missing dataset '%s'", path, name);
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    RP_CHECK(ds >= 0, "%s: '%s' is not a dataset", path, name);
    hid_t space = H5Dget_space(ds);
    int rank = H5Sget_simple_extent_ndims(space);
    RP_CHECK(rank >= 0 && rank <= 4, "%s: dataset '%s' has unsupported rank %d", path, name, rank);
    H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    H5Dclose(ds);
    return rank;
}

int h5_param_dims(const ParamInfo *p, hsize_t dims[2]) {
    dims[0] = (hsize_t)p->rows;
    dims[1] = (hsize_t)p->cols;
    return p->cols ? 2 : 1;
}

void h5_shape_text(char *buf, size_t size, int rank, const hsize_t *dims) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

static void read_checked(hid_t file, const char *path, const char *name, void *out, int rank,
                         const hsize_t *dims, H5T_class_t cls, size_t elem, hid_t mem_type,
                         const char *type_name) {
    RP_CHECK(h5_exists(file, name), "%s: missing dataset '%s'", path, name);
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    RP_CHECK(ds >= 0, "%s: '%s' is not a dataset", path, name);
    hid_t type = H5Dget_type(ds);
    RP_CHECK(H5Tget_class(type) == cls && H5Tget_size(type) == elem, "%s: dataset '%s': expected %s", path,
             name, type_name);
    hid_t space = H5Dget_space(ds);
    hsize_t found[8] = {0};
    int found_rank = H5Sget_simple_extent_ndims(space);
    if (found_rank > 0 && found_rank <= 8)
        H5Sget_simple_extent_dims(space, found, NULL);
    int same = found_rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = found[i] == dims[i];
    if (!same) {
        char want[128], got[128];
        h5_shape_text(want, sizeof want, rank, dims);
        h5_shape_text(got, sizeof got, found_rank < 0 ? 0 : found_rank > 8 ? 8 : found_rank, found);
        RP_FATAL("%s: dataset '%s': expected shape %s, got %s", path, name, want, got);
    }
    RP_CHECK(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0,
             "%s: cannot read dataset '%s' (file truncated or corrupt)", path, name);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(ds);
}

void h5_read_floats(hid_t f, const char *path, const char *name, float *out, int rank, const hsize_t *dims) {
    read_checked(f, path, name, out, rank, dims, H5T_FLOAT, 4, H5T_NATIVE_FLOAT, "float32");
}
void h5_read_ints(hid_t f, const char *path, const char *name, int32_t *out, int rank, const hsize_t *dims) {
    read_checked(f, path, name, out, rank, dims, H5T_INTEGER, 4, H5T_NATIVE_INT32, "int32");
}
void h5_read_int64s(hid_t f, const char *path, const char *name, int64_t *out, int rank, const hsize_t *dims) {
    read_checked(f, path, name, out, rank, dims, H5T_INTEGER, 8, H5T_NATIVE_INT64, "int64");
}
void h5_read_uint64s(hid_t f, const char *path, const char *name, uint64_t *out, hsize_t count) {
    read_checked(f, path, name, out, 1, &count, H5T_INTEGER, 8, H5T_NATIVE_UINT64, "uint64");
}
void h5_read_doubles(hid_t f, const char *path, const char *name, double *out, hsize_t count) {
    read_checked(f, path, name, out, 1, &count, H5T_FLOAT, 8, H5T_NATIVE_DOUBLE, "float64");
}
double h5_read_double(hid_t f, const char *path, const char *name) {
    double v;
    read_checked(f, path, name, &v, 0, NULL, H5T_FLOAT, 8, H5T_NATIVE_DOUBLE, "float64 scalar");
    return v;
}

char *h5_read_string(hid_t f, const char *path, const char *name) {
    RP_CHECK(h5_exists(f, name), "%s: missing dataset '%s'", path, name);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    RP_CHECK(ds >= 0, "%s: '%s' is not a dataset", path, name);
    char *s = read_string_value(ds, 0, path, name);
    H5Dclose(ds);
    return s;
}
