/* The training order of fine-tuning (task_sampler.h). */
#include "train/tasks/task_sampler.h"

#include <string.h>

#include "core/common.h"
#include "core/io/h5io.h"

void task_sampler_create(TaskSampler *s, const TaskFeatures *f, uint64_t seed, int batch_size, int group_by_length) {
    RP_CHECK(f->count > 0, "internal: a sampler over no sequences");
    memset(s, 0, sizeof *s);
    s->count = f->count;
    s->batch_size = batch_size;
    s->order = xmalloc(sizeof(int) * (size_t)s->count);
    for (int i = 0; i < s->count; i++)
        s->order[i] = i;
    rng_seed(&s->rng, seed);
    if (group_by_length) {
        s->lengths = f->lengths;
        s->scratch = xmalloc(sizeof(int) * 2 * (size_t)s->count);
    }
}

void task_sampler_free(TaskSampler *s) {
    free(s->order);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

static void shuffle(int *x, int n, Rng *rng) {
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)rng_below(rng, (uint64_t)i + 1), t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

/* Stable sort of x[0..n) by lengths[x] descending (bottom-up merge sort through tmp [n]). */
static void sort_longest_first(int *x, int n, const int *lengths, int *tmp) {
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                tmp[o++] = lengths[x[b]] > lengths[x[a]] ? x[b++] : x[a++];
            while (a < mid)
                tmp[o++] = x[a++];
            while (b < hi)
                tmp[o++] = x[b++];
        }
        memcpy(x, tmp, sizeof(int) * (size_t)n);
    }
}

/* group_by_length: order[0..head) completes the batch begun last epoch; from there, chunks of
 * TASK_GROUP_BATCHES batches sorted longest first, then the whole batches shuffled. scratch
 * [2 count]: the merge buffer, then the gathered batches, and the batch permutation behind it. */
static void group_by_length(TaskSampler *s, int head) {
    int B = s->batch_size, chunk = TASK_GROUP_BATCHES * B, *tmp = s->scratch, *batch_of = s->scratch + s->count;
    for (int c = head; c < s->count; c += chunk)
        sort_longest_first(s->order + c, s->count - c < chunk ? s->count - c : chunk, s->lengths, tmp);
    int batches = (s->count - head) / B;
    for (int k = 0; k < batches; k++)
        batch_of[k] = k;
    shuffle(batch_of, batches, &s->rng);
    for (int k = 0; k < batches; k++)
        memcpy(tmp + (size_t)k * B, s->order + head + (size_t)batch_of[k] * B, sizeof(int) * (size_t)B);
    memcpy(s->order + head, tmp, sizeof(int) * (size_t)batches * B);
}

void task_sampler_next(TaskSampler *s, int *rows) {
    for (int b = 0; b < s->batch_size; b++) {
        if (s->next == 0) {
            shuffle(s->order, s->count, &s->rng);
            if (s->lengths) {
                int head = b ? s->batch_size - b : 0;
                group_by_length(s, head < s->count ? head : s->count);
            }
        }
        rows[b] = s->order[s->next];
        s->next = (s->next + 1) % s->count;
    }
}

void task_sampler_save(const TaskSampler *s, hid_t file) {
    hsize_t count = (hsize_t)s->count;
    h5_write_ints(file, "train/sampler_order", s->order, 1, &count);
    uint64_t state[5] = {(uint64_t)s->next, s->rng.s[0], s->rng.s[1], s->rng.s[2], s->rng.s[3]};
    h5_write_uint64s(file, "train/sampler_state", state, 5);
}

void task_sampler_load(TaskSampler *s, hid_t file, const char *path) {
    hsize_t count = (hsize_t)s->count;
    h5_read_ints(file, path, "train/sampler_order", s->order, 1, &count);
    char *seen = xcalloc((size_t)s->count, 1);
    for (int i = 0; i < s->count; i++) {
        int v = s->order[i];
        RP_CHECK(v >= 0 && v < s->count && !seen[v], "%s: dataset /train/sampler_order: entry %d is %d, expected a "
                 "permutation of 0..%d", path, i, v, s->count - 1);
        seen[v] = 1;
    }
    free(seen);
    uint64_t state[5];
    h5_read_uint64s(file, path, "train/sampler_state", state, 5);
    RP_CHECK(state[0] < (uint64_t)s->count, "%s: dataset /train/sampler_state: position %llu, expected below %d",
             path, (unsigned long long)state[0], s->count);
    s->next = (int)state[0];
    memcpy(s->rng.s, state + 1, sizeof s->rng.s);
}
