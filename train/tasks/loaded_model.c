/* Checkpoint + vocabulary loading for inference commands (loaded_model.h). */
#include "train/tasks/loaded_model.h"

#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "train/model/checkpoint.h"

void load_model_with_vocab(LoadedModel *out, const char *checkpoint, const char *vocab_path) {
    memset(out, 0, sizeof *out);
    CheckpointFile c;
    checkpoint_file_open(&c, checkpoint);
    out->cfg = c.cfg;
    out->config_ini = xstrdup(c.config_ini);
    checkpoint_file_model(&c, &out->model, 1);
    int lower = out->cfg.data.do_lower_case;
    out->vocab_text = checkpoint_read_vocab(c.file, checkpoint, &lower);
    checkpoint_file_close(&c);
    out->vocab_origin = checkpoint;
    if (vocab_path && out->vocab_text) { /* --vocab cannot replace the vocabulary the model was trained with */
        char *given = read_file(vocab_path, NULL, "vocabulary (--vocab)");
        int line = 1;
        size_t at = 0;
        while (given[at] && given[at] == out->vocab_text[at])
            line += given[at++] == '\n';
        RP_CHECK(given[at] == out->vocab_text[at], "%s: --vocab differs from the vocabulary stored in %s (first at line "
                 "%d); the checkpoint's own is used by its model: omit --vocab", vocab_path, checkpoint, line);
        free(given);
    }
    if (!vocab_path && out->cfg.data.vocab[0])
        vocab_path = out->cfg.data.vocab; /* e.g. `realpos init`: the config's [data] vocab */
    if (!out->vocab_text) {
        RP_CHECK(vocab_path, "%s: the checkpoint holds no /vocab and its config no [data] vocab; pass --vocab "
                 "VOCAB.txt", checkpoint);
        out->vocab_text = read_file(vocab_path, NULL, "vocabulary");
        out->vocab_origin = vocab_path;
    }
    out->cfg.data.do_lower_case = lower;
    out->tok = tokenizer_for_model(out->vocab_text, strlen(out->vocab_text), lower, out->vocab_origin,
                                   out->cfg.model.vocab_size, "the checkpoint's model.vocab_size");
}

void loaded_model_free(LoadedModel *lm) {
    tokenizer_free(lm->tok);
    free(lm->vocab_text);
    model_free(&lm->model);
    free(lm->config_ini);
    memset(lm, 0, sizeof *lm);
}
