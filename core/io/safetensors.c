/* safetensors reader and writer (safetensors.h). */
#define _FILE_OFFSET_BITS 64
#include "core/io/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/io/atomic_file.h"
#include "core/common.h"
#include "core/io/json.h"
#include "core/io/paths.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

#define ST_MAX_HEADER (100u << 20) /* 100 MB, the reference implementation's limit */
#define ST_MAX_EXACT 9007199254740992.0 /* 2^53: JSON numbers above are not exact integers */

static const struct {
    const char *name;
    int size;
} dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8}, {"I32", 4},
              {"U32", 4}, {"I16", 2}, {"U16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1},
              {"F8_E5M2", 1}};

float st_f16_to_float(uint16_t bits) {
    uint32_t sign = (uint32_t)(bits >> 15) << 31, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    uint32_t out;
    if (exponent == 0) { /* zero or subnormal: mantissa x 2^-24 */
        float v = ldexpf((float)mantissa, -24);
        return sign ? -v : v;
    }
    if (exponent == 31) /* inf / NaN, payload kept */
        out = sign | 0x7f800000u | (mantissa << 13);
    else
        out = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
    float f;
    memcpy(&f, &out, sizeof f);
    return f;
}

float st_bf16_to_float(uint16_t bits) {
    uint32_t out = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &out, sizeof f);
    return f;
}

/* A JSON number that is an exact non-negative integer (< 2^53); fatal otherwise. */
static uint64_t json_uint(const cJSON *item, const char *path, const char *tensor, const char *field) {
    RP_CHECK(cJSON_IsNumber(item), "%s: safetensors header: tensor '%s': %s: expected non-negative integers",
             path, tensor, field);
    double v = item->valuedouble;
    RP_CHECK(v >= 0 && v < ST_MAX_EXACT && v == floor(v),
             "%s: safetensors header: tensor '%s': %s: expected non-negative integers, got %g", path, tensor,
             field, v);
    return (uint64_t)v;
}

static void parse_tensor(StTensor *t, const cJSON *entry, const char *path) {
    const char *name = entry->string;
    RP_CHECK(cJSON_IsObject(entry), "%s: safetensors header: tensor '%s': expected an object", path, name);
    t->name = xstrdup(name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    RP_CHECK(cJSON_IsString(dtype), "%s: safetensors header: tensor '%s': missing string 'dtype'", path, name);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtype->valuestring, dtypes[i].name)) {
            strcpy(t->dtype, dtypes[i].name);
            t->elem_size = dtypes[i].size;
        }
    RP_CHECK(t->elem_size, "%s: safetensors header: tensor '%s': unknown dtype '%.32s'", path, name,
             dtype->valuestring);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    RP_CHECK(cJSON_IsArray(shape), "%s: safetensors header: tensor '%s': missing array 'shape'", path, name);
    t->rank = cJSON_GetArraySize(shape);
    RP_CHECK(t->rank <= ST_MAX_RANK, "%s: safetensors header: tensor '%s': rank %d exceeds %d", path, name, t->rank,
             ST_MAX_RANK);
    t->numel = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        t->shape[i] = json_uint(d, path, name, "shape");
        RP_CHECK(t->shape[i] == 0 || t->numel <= UINT64_MAX / t->shape[i],
                 "%s: safetensors header: tensor '%s': the element count overflows", path, name);
        t->numel *= t->shape[i];
    }
    RP_CHECK(t->numel <= UINT64_MAX / (uint64_t)t->elem_size,
             "%s: safetensors header: tensor '%s': the byte size overflows", path, name);
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    RP_CHECK(cJSON_IsArray(offsets) && cJSON_GetArraySize(offsets) == 2,
             "%s: safetensors header: tensor '%s': expected 'data_offsets': [begin, end]", path, name);
    t->begin = json_uint(offsets->child, path, name, "data_offsets");
    t->end = json_uint(offsets->child->next, path, name, "data_offsets");
    RP_CHECK(t->begin <= t->end, "%s: safetensors header: tensor '%s': data_offsets [%llu, %llu]: begin after end",
             path, name, (unsigned long long)t->begin, (unsigned long long)t->end);
    RP_CHECK(t->end - t->begin == t->numel * (uint64_t)t->elem_size,
             "%s: safetensors header: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but %llu elements "
             "of %s need %llu",
             path, name, (unsigned long long)t->begin, (unsigned long long)t->end,
             (unsigned long long)(t->end - t->begin), (unsigned long long)t->numel, t->dtype,
             (unsigned long long)(t->numel * (uint64_t)t->elem_size));
}

static int by_offsets(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const StTensor *const *)a)->name, (*(const StTensor *const *)b)->name);
}

/* The tensors must tile [0, buffer) exactly (no overlap, no hole) and have unique names. */
static void check_layout(const StFile *st, uint64_t buffer) {
    const StTensor **order = xmalloc(sizeof(StTensor *) * (size_t)(st->count ? st->count : 1));
    for (int i = 0; i < st->count; i++)
        order[i] = &st->tensors[i];
    qsort(order, (size_t)st->count, sizeof *order, by_name);
    for (int i = 1; i < st->count; i++)
        RP_CHECK(strcmp(order[i - 1]->name, order[i]->name), "%s: safetensors header: tensor '%s' appears twice",
                 st->path, order[i]->name);
    for (int i = 0; i < st->count; i++) {
        const StTensor *t = &st->tensors[i];
        RP_CHECK(t->end <= buffer,
                 "%s: safetensors header: tensor '%s': data_offsets [%llu, %llu] run past the data buffer "
                 "(%llu bytes; file truncated?)",
                 st->path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)buffer);
    }
    qsort(order, (size_t)st->count, sizeof *order, by_offsets);
    uint64_t at = 0;
    for (int i = 0; i < st->count; i++) {
        const StTensor *t = order[i];
        RP_CHECK(t->begin >= at || t->begin == t->end,
                 "%s: safetensors header: tensor '%s': data_offsets [%llu, %llu] overlap the previous tensor "
                 "(which ends at %llu)",
                 st->path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)at);
        RP_CHECK(t->begin <= at, "%s: safetensors header: tensor '%s': a hole of %llu bytes before data_offsets "
                 "[%llu, %llu]", st->path, t->name, (unsigned long long)(t->begin - at),
                 (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->end > at)
            at = t->end;
    }
    RP_CHECK(at == buffer, "%s: safetensors: the data buffer has %llu bytes but the tensors cover %llu",
             st->path, (unsigned long long)buffer, (unsigned long long)at);
    free(order);
}

void st_open(StFile *st, const char *path) {
    memset(st, 0, sizeof *st);
    st->path = xstrdup(path);
    require_regular_file(path, "safetensors file");
    st->file = fopen(path, "rb");
    RP_CHECK(st->file, "%s: cannot open safetensors file: %s", path, strerror(errno));
    RP_CHECK(fseeko(st->file, 0, SEEK_END) == 0 && (st->file_size = (uint64_t)ftello(st->file)) != (uint64_t)-1,
             "%s: cannot determine the file size", path);
    uint8_t raw[8];
    RP_CHECK(st->file_size >= 8 && fseeko(st->file, 0, SEEK_SET) == 0 && fread(raw, 1, 8, st->file) == 8,
             "%s: safetensors: file of %llu bytes is shorter than the 8-byte header length", path,
             (unsigned long long)st->file_size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | raw[i];
    RP_CHECK(n >= 2 && n <= st->file_size - 8,
             "%s: safetensors: header length %llu does not fit the file of %llu bytes (truncated or not safetensors)",
             path, (unsigned long long)n, (unsigned long long)st->file_size);
    RP_CHECK(n <= ST_MAX_HEADER, "%s: safetensors: header length %llu exceeds %u bytes", path,
             (unsigned long long)n, ST_MAX_HEADER);
    char *header = xmalloc(n + 1);
    RP_CHECK(fread(header, 1, n, st->file) == n, "%s: safetensors: cannot read the %llu-byte header", path,
             (unsigned long long)n);
    header[n] = '\0';
    RP_CHECK(header[0] == '{', "%s: safetensors: the header does not start with '{'", path);
    size_t json_len = n;
    while (json_len > 0 && header[json_len - 1] == ' ') /* the format pads the header with spaces */
        json_len--;
    cJSON *json = json_parse_strict(header, json_len, path, "safetensors header");
    RP_CHECK(cJSON_IsObject(json), "%s: safetensors: the header is not a JSON object", path);
    st->data_start = 8 + n;
    int capacity = cJSON_GetArraySize(json);
    st->tensors = xcalloc((size_t)(capacity ? capacity : 1), sizeof(StTensor));
    for (const cJSON *entry = json->child; entry; entry = entry->next) {
        if (!strcmp(entry->string, "__metadata__")) {
            RP_CHECK(cJSON_IsObject(entry), "%s: safetensors header: '__metadata__' must be an object", path);
            for (const cJSON *m = entry->child; m; m = m->next)
                RP_CHECK(cJSON_IsString(m), "%s: safetensors header: '__metadata__' key '%s': expected a string",
                         path, m->string);
            continue;
        }
        parse_tensor(&st->tensors[st->count++], entry, path);
    }
    cJSON_Delete(json);
    free(header);
    check_layout(st, st->file_size - st->data_start);
}

void st_close(StFile *st) {
    if (st->file)
        fclose(st->file);
    for (int i = 0; i < st->count; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    free(st->path);
    memset(st, 0, sizeof *st);
}

const StTensor *st_find(const StFile *st, const char *name) {
    for (int i = 0; i < st->count; i++)
        if (!strcmp(st->tensors[i].name, name))
            return &st->tensors[i];
    return NULL;
}

void st_read_floats(const StFile *st, const StTensor *t, float *out) {
    int f32 = !strcmp(t->dtype, "F32"), f16 = !strcmp(t->dtype, "F16"), bf16 = !strcmp(t->dtype, "BF16");
    RP_CHECK(f32 || f16 || bf16, "%s: tensor '%s': unsupported dtype %s (expected F32, F16 or BF16)", st->path,
             t->name, t->dtype);
    RP_CHECK(fseeko(st->file, (off_t)(st->data_start + t->begin), SEEK_SET) == 0, "%s: tensor '%s': cannot seek",
             st->path, t->name);
    if (f32) {
        RP_CHECK(fread(out, 4, t->numel, st->file) == t->numel, "%s: tensor '%s': cannot read %llu bytes", st->path,
                 t->name, (unsigned long long)(t->end - t->begin));
        return;
    }
    enum { CHUNK = 1 << 16 };
    uint16_t *buf = xmalloc(sizeof(uint16_t) * CHUNK);
    for (uint64_t done = 0; done < t->numel;) {
        size_t n = t->numel - done < CHUNK ? (size_t)(t->numel - done) : CHUNK;
        RP_CHECK(fread(buf, 2, n, st->file) == n, "%s: tensor '%s': cannot read %llu bytes", st->path, t->name,
                 (unsigned long long)(t->end - t->begin));
        for (size_t i = 0; i < n; i++)
            out[done + i] = f16 ? st_f16_to_float(buf[i]) : st_bf16_to_float(buf[i]);
        done += n;
    }
    free(buf);
}

int st_write_floats(const char *path, const StWriteTensor *tensors, int count, const char *const *meta, int num_meta,
                    char *why, size_t why_size) {
    cJSON *header = cJSON_CreateObject(), *metadata = cJSON_CreateObject();
    for (int i = 0; i < num_meta; i++)
        cJSON_AddStringToObject(metadata, meta[2 * i], meta[2 * i + 1]);
    cJSON_AddItemToObject(header, "__metadata__", metadata);
    uint64_t at = 0;
    for (int i = 0; i < count; i++) {
        const StWriteTensor *t = &tensors[i];
        cJSON *entry = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offsets = cJSON_CreateArray();
        uint64_t numel = 1;
        for (int d = 0; d < t->rank; d++) {
            numel *= t->shape[d];
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        }
        cJSON_AddStringToObject(entry, "dtype", "F32");
        cJSON_AddItemToObject(entry, "shape", shape);
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)at));
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(at + 4 * numel)));
        cJSON_AddItemToObject(entry, "data_offsets", offsets);
        cJSON_AddItemToObject(header, t->name, entry);
        at += 4 * numel;
        RP_CHECK(at < 1e15, "%s: tensors too large for exact JSON offsets", path); /* %1.15g prints them exactly */
    }
    char *text = cJSON_PrintUnformatted(header);
    cJSON_Delete(header);
    RP_CHECK(text, "out of memory writing %s", path);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8; /* data buffer 8-byte aligned */
    AtomicFile out;
    if (atomic_file_open(&out, path, why, why_size) != 0) {
        free(text);
        return -1;
    }
    uint8_t raw[8];
    for (int i = 0; i < 8; i++)
        raw[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(raw, 1, 8, out.f) == 8 && fwrite(text, 1, len, out.f) == len;
    for (size_t i = len; ok && i < padded; i++)
        ok = fputc(' ', out.f) != EOF;
    for (int i = 0; ok && i < count; i++) {
        uint64_t numel = 1;
        for (int d = 0; d < tensors[i].rank; d++)
            numel *= tensors[i].shape[d];
        ok = fwrite(tensors[i].data, 4, numel, out.f) == numel;
    }
    if (!ok)
        out.error = errno ? errno : EIO;
    free(text);
    return atomic_file_commit(&out, why, why_size); /* a failed write above is reported (and cleaned) here */
}
