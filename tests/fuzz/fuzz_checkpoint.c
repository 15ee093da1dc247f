/* Fuzz target: the checkpoint reader, as `realpos inspect` / `eval` / `finetune` use it:
 * checkpoint_file_open (format, version, and whatever verification it does before HDF5 parses the
 * file; the stored config and the output heads), every parameter, the optimizer moments and the
 * vocabulary. The input is a checkpoint file (seeds: small checkpoints of `realpos init`); it must
 * load or end in an error exit. Models above MAX_PARAMS floats are not allocated. After an error
 * exit every HDF5 object left open is closed (H5close; the library reopens itself). */
#include <setjmp.h>
#include <stdlib.h>

#include "core/common.h"
#include "core/io/h5io.h"
#include "optim/adamw.h"
#include "tests/fuzz/fuzz.h"
#include "train/model/checkpoint.h"

#define MAX_PARAMS 4e6

static double param_estimate(const ModelConfig *c) {
    double H = c->hidden_size, I = c->intermediate_size;
    return (c->vocab_size + c->max_position + c->type_vocab_size + 8.0) * H +
           c->num_layers * (4.0 * H * H + 2.0 * H * I + 10.0 * H) + (2.0 * c->relative_k + 1) * H;
}

static void load(const char *path) {
    static CheckpointFile c;
    checkpoint_file_open(&c, path);
    hid_t file = c.file;
    const ModelConfig *mc = &c.cfg.model;
    ModelHeads heads = c.heads;
    if (param_estimate(mc) + (double)heads.num_labels * mc->hidden_size < MAX_PARAMS) {
        Model m;
        model_create(&m, mc, heads);
        checkpoint_load_model(file, path, &m);
        AdamW opt;
        adamw_create(&opt, &m.table);
        checkpoint_load_optimizer(file, path, &m, &opt);
        adamw_free(&opt);
        model_free(&m);
    }
    int lower = 1;
    free(checkpoint_read_vocab(file, path, &lower));
    checkpoint_file_close(&c);
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    const char *path = fuzz_write_file(data, size, ".h5");
    fuzz_begin();
    if (setjmp(fuzz_jump) == 0) {
        load(path);
        fuzz_end();
    } else {
        fuzz_recover();
        H5close();
    }
    return 0;
}
