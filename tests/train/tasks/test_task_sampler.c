/* TaskSampler (train/tasks/task_sampler.h): the default order is the one fine-tuning always drew
 * (an independent transcription of it: Fisher-Yates of the previous epoch's order from an Rng
 * seeded by the seed, the stream running on across epochs); group_by_length gives every sequence
 * once per epoch, is a pure function of (seed, epoch), pads far less than the default order, and
 * a sampler saved to HDF5 and loaded into a fresh one continues exactly, mid-batch and across
 * epoch boundaries alike. COUNT = 1000 is no multiple of B = 32, so epochs start mid-batch. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "train/tasks/task_sampler.h"
#include "tests/check.h"

enum { COUNT = 1000, B = 32, L = 64, BATCHES = 200 }; /* 200 batches: 6.4 epochs */
static const SpecialTokens SPECIAL = {0, 1, 2, 3, 4};

/* The draws of `batches` batches into rows [batches, B]. */
static void draw(TaskSampler *s, int batches, int *rows) {
    for (int k = 0; k < batches; k++)
        task_sampler_next(s, rows + (size_t)k * B);
}

/* Padded tokens of the batches: sum of B x (longest in the batch). */
static long padded_tokens(const TaskFeatures *f, const int *rows, int batches) {
    long total = 0;
    for (int k = 0; k < batches; k++)
        total += (long)B * features_batch_length(f, rows + (size_t)k * B, B, 1);
    return total;
}

int main(void) {
    TestTally t = {0, 0};
    TaskFeatures f;
    features_init(&f, L);
    Rng rng;
    rng_seed(&rng, 3);
    int text[L];
    for (int j = 0; j < L; j++)
        text[j] = 5 + j;
    long real = 0;
    for (int i = 0; i < COUNT; i++) { /* lengths 3..62, skewed short as sentences are */
        int n = 1 + (int)(rng_below(&rng, 60) * rng_below(&rng, 60) / 59);
        features_add(&f, SPECIAL, text, n, NULL, 0, i);
    }
    for (int i = 0; i < COUNT; i++)
        real += f.lengths[i];
    static int plain[BATCHES * B], grouped[BATCHES * B], again[BATCHES * B], other[BATCHES * B], resumed[BATCHES * B];

    /* the default order, against its transcription */
    TaskSampler s;
    task_sampler_create(&s, &f, 42, B, 0);
    draw(&s, BATCHES, plain);
    task_sampler_free(&s);
    int order[COUNT], next = 0, same = 1;
    for (int i = 0; i < COUNT; i++)
        order[i] = i;
    rng_seed(&rng, 42);
    for (int n = 0; n < BATCHES * B; n++) {
        if (next == 0)
            for (int i = COUNT - 1; i > 0; i--) {
                int j = (int)rng_below(&rng, (uint64_t)i + 1), tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
        same &= plain[n] == order[next];
        next = (next + 1) % COUNT;
    }
    CHECK(&t, same, "group_by_length = no: the order fine-tuning always drew (Fisher-Yates per epoch, seed 42)");

    /* group_by_length: every sequence once per epoch, a pure function of the seed */
    task_sampler_create(&s, &f, 42, B, 1);
    draw(&s, BATCHES, grouped);
    task_sampler_free(&s);
    task_sampler_create(&s, &f, 42, B, 1);
    draw(&s, BATCHES, again);
    task_sampler_free(&s);
    task_sampler_create(&s, &f, 43, B, 1);
    draw(&s, BATCHES, other);
    task_sampler_free(&s);
    int epochs_ok = 1;
    for (int e = 0; (e + 1) * COUNT <= BATCHES * B; e++) {
        char seen[COUNT] = {0};
        for (int n = e * COUNT; n < (e + 1) * COUNT; n++)
            seen[grouped[n]]++;
        for (int i = 0; i < COUNT; i++)
            epochs_ok &= seen[i] == 1;
    }
    CHECK(&t, epochs_ok, "group_by_length: each of the 6 whole epochs visits every sequence exactly once");
    CHECK(&t, !memcmp(grouped, again, sizeof grouped), "group_by_length: the same seed draws the same batches");
    CHECK(&t, memcmp(grouped, other, sizeof grouped) != 0, "group_by_length: another seed draws other batches");
    CHECK(&t, memcmp(grouped, plain, sizeof grouped) != 0, "group_by_length: not the default order");

    long pad_plain = padded_tokens(&f, plain, BATCHES), pad_grouped = padded_tokens(&f, grouped, BATCHES);
    long real_drawn = 0;
    for (int n = 0; n < BATCHES * B; n++)
        real_drawn += f.lengths[grouped[n]];
    CHECK(&t, pad_grouped < pad_plain / 2 && pad_grouped < real_drawn * 5 / 4,
          "group_by_length: %ld padded tokens for %ld real (default order: %ld, full padding %ld)", pad_grouped,
          real_drawn, pad_plain, (long)BATCHES * B * L);
    /* batch lengths not sorted over time: long and short batches alternate */
    int rises = 0;
    for (int k = 1; k < BATCHES; k++)
        rises += features_batch_length(&f, grouped + (size_t)k * B, B, 1) >
                 features_batch_length(&f, grouped + (size_t)(k - 1) * B, B, 1);
    CHECK(&t, rises > BATCHES / 5, "group_by_length: batches in shuffled order (%d of %d batches longer than "
          "the one before)", rises, BATCHES - 1);

    /* save / load: continue exactly from any point (mid-epoch, an epoch's last batch, the first) */
    char path[] = "/tmp/realpos-sampler-XXXXXX";
    int fd = mkstemp(path);
    RP_CHECK(fd >= 0, "mkstemp");
    close(fd);
    const int cuts[] = {1, 31, 32, 62, 63, 150};
    for (int group = 0; group <= 1; group++)
        for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
            int cut = cuts[c];
            task_sampler_create(&s, &f, 42, B, group);
            draw(&s, cut, resumed);
            hid_t h = h5_create(path);
            task_sampler_save(&s, h);
            h5_close(h, path);
            task_sampler_free(&s);
            task_sampler_create(&s, &f, 42, B, group);
            h = h5_open(path, 0);
            task_sampler_load(&s, h, path);
            h5_close(h, path);
            draw(&s, BATCHES - cut, resumed + (size_t)cut * B);
            task_sampler_free(&s);
            CHECK(&t, !memcmp(resumed, group ? grouped : plain, sizeof resumed),
                  "group_by_length = %s: saved after %d batches (%d sequences, epoch %d), loaded into a new "
                  "sampler: the same %d batches as without the stop", group ? "yes" : "no", cut, cut * B,
                  cut * B / COUNT, BATCHES);
        }
    unlink(path);
    (void)real;
    features_free(&f);
    return tally_exit(&t);
}
