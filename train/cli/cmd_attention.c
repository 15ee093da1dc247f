/* realpos attention: a checkpoint's attention maps on sentences of text, for analysis
 * (scripts/analyze_attention.py).
 *
 * Each non-blank line of --input becomes [CLS] wordpieces [SEP], cut to --max-len tokens (and to
 * model.max_position with absolute positions); the B lines form one batch run through the encoder
 * in eval mode, laid out as --padding asks (data.padding's names, train/model/batch_layout.h):
 * longest (the default) pads the shorter lines to the longest, L (attention_mask 0); max_length
 * pads every line to --max-len, L; none runs them unpadded (each line's tokens back to back,
 * attention per line on its own lengths[b]^2 scores, no compute on padding), L the longest. The
 * maps of the real tokens are the same in every layout (to fp32 summation order). OUT.h5 holds
 *   /input_ids [B, L] int32, /lengths [B] int32
 *   /tokens               text: line b holds sentence b's lengths[b] token strings, space-separated
 *   /layer_N/probs        [B, heads, L, L] float32: P[b, h, i, j], query i attending to key j
 *                         (keys j >= lengths[b] get ~0, exactly 0 with --padding none; query rows
 *                         i >= lengths[b] are padding, all 0 with --padding none)
 *   /layer_N/carried      [B, heads, L, L] residual models: the carried scores C_N = sum of the
 *                         layers' scores S_1..S_N (P = softmax(scale * C_N + mask), attention.h;
 *                         0 outside the real tokens' block with --padding none)
 *   /distance_embedding/layer_N   relative modes: the layer's table [2k+1 or k+1, d or 1]
 *   /relative_attention_bias      t5: the shared table [t5_num_buckets, heads]
 *   /position_bias        t5, alibi: [heads, 2L-1] float32, the bias head h adds to the scaled
 *                         score of every pair with j - i = u - (L-1) (t5: b[bucket(j-i), h];
 *                         alibi: -m_h |i-j|), the same in every layer
 * with root attributes config (the checkpoint's INI), checkpoint, relative_position, relative_k,
 * t5_num_buckets, t5_max_distance, residual_attention, residual_attention_mean,
 * num_layers, num_heads. Layers count from 0. */
#include <string.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/files.h"
#include "core/io/h5io.h"
#include "core/io/paths.h"
#include "layers/positions.h"
#include "train/model/batch_layout.h"
#include "train/model/checkpoint.h"
#include "train/cli/commands.h"
#include "train/tasks/loaded_model.h"
#include "train/data/tokenizer.h"

typedef struct {
    int count, max_len, longest;
    int *ids;     /* [count, max_len] */
    int *lengths; /* [count] */
} Sentences;

/* Tokenize each non-blank line as [CLS] tokens [SEP], at most max_len ids. */
static Sentences read_sentences(const char *path, const Tokenizer *tok, int max_len) {
    char *text = read_file(path, NULL, "sentences (--input)");
    SpecialTokens sp = tokenizer_special(tok);
    Sentences s = {0, max_len, 0, NULL, NULL};
    int capacity = 0, truncated = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int *ids = xmalloc(sizeof(int) * (len + 1));
        size_t n = tokenizer_encode(tok, line, len, ids, len + 1);
        if (n > 0) {
            if (s.count == capacity) {
                capacity = capacity ? 2 * capacity : 16;
                s.ids = realloc(s.ids, sizeof(int) * (size_t)capacity * (size_t)max_len);
                s.lengths = realloc(s.lengths, sizeof(int) * (size_t)capacity);
                RP_CHECK(s.ids && s.lengths, "out of memory reading %s", path);
            }
            int keep = n + 2 > (size_t)max_len ? max_len - 2 : (int)n;
            truncated += keep < (int)n;
            int *row = s.ids + (size_t)s.count * max_len;
            memset(row, 0, sizeof(int) * (size_t)max_len);
            row[0] = sp.cls;
            memcpy(row + 1, ids, sizeof(int) * (size_t)keep);
            row[keep + 1] = sp.sep;
            for (int l = keep + 2; l < max_len; l++)
                row[l] = sp.pad;
            s.lengths[s.count++] = keep + 2;
            if (keep + 2 > s.longest)
                s.longest = keep + 2;
        }
        free(ids);
        line = end ? end + 1 : line + len;
    }
    free(text);
    RP_CHECK(s.count > 0, "%s: no sentences (every line is blank)", path);
    if (truncated)
        rp_log("%d of %d sentences cut to %d tokens", truncated, s.count, max_len);
    return s;
}

/* The sentences' token strings, one line per sentence. */
static char *token_text(const Sentences *s, const Tokenizer *tok) {
    size_t size = 1;
    for (int b = 0; b < s->count; b++)
        for (int l = 0; l < s->lengths[b]; l++)
            size += strlen(tokenizer_token(tok, s->ids[(size_t)b * s->max_len + l])) + 1;
    char *text = xmalloc(size), *at = text;
    for (int b = 0; b < s->count; b++)
        for (int l = 0; l < s->lengths[b]; l++)
            at += sprintf(at, "%s%c", tokenizer_token(tok, s->ids[(size_t)b * s->max_len + l]),
                          l + 1 < s->lengths[b] ? ' ' : '\n');
    *at = '\0';
    return text;
}

/* The residual scores C_l of every layer: [layers, B, heads, L, L], or NULL without residual
 * attention. */
typedef struct {
    float *maps;
    size_t map_floats; /* B * heads * L * L */
} CarriedMaps;

static void keep_carried(void *user, int layer, const LayerActs *acts, const float *carried) {
    (void)acts;
    CarriedMaps *keep = user;
    if (keep->maps && carried)
        memcpy(keep->maps + (size_t)layer * keep->map_floats, carried, sizeof(float) * keep->map_floats);
}

/* maps [B, heads, L, L] of the batch's score blocks `blocks` (padded: the same; unpadded: sequence
 * b's [heads, L_b, L_b] back to back, attention.h), zero outside each sequence's block */
static void padded_maps(float *maps, const float *blocks, const Batch *batch, int heads) {
    const size_t L = (size_t)batch->L;
    if (!batch->offsets) {
        memcpy(maps, blocks, sizeof(float) * (size_t)batch->B * heads * L * L);
        return;
    }
    memset(maps, 0, sizeof(float) * (size_t)batch->B * heads * L * L);
    for (int b = 0; b < batch->B; b++) {
        const size_t n = (size_t)batch_seq_rows(batch, b);
        for (size_t h = 0; h < (size_t)heads; h++)
            for (size_t i = 0; i < n; i++)
                memcpy(maps + (((size_t)b * heads + h) * L + i) * L, blocks + (h * n + i) * n, sizeof(float) * n);
        blocks += (size_t)heads * n * n;
    }
}

int cmd_attention(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *input = NULL, *out = NULL, *max_len_text = NULL, *vocab_path = NULL, *padding_text = "longest";
    CliOption options[] = {{"input", &input}, {"out", &out}, {"max-len", &max_len_text}, {"vocab", &vocab_path},
                           {"padding", &padding_text}};
    CliArgs args = cli_parse(argc, argv, options, 5);
    const PaddingKind padding = padding_kind_parse(padding_text, "--padding");
    RP_CHECK(args.num_positional == 1 && input && out && !args.num_sets, "usage: realpos %s", usage);
    char ckpt[CONFIG_PATH_MAX + 32]; /* RUN_DIR or RUN_DIR/latest: the run's newest */
    checkpoint_resolve(args.positional[0], NULL, ckpt, sizeof ckpt);
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_input(&plan, ckpt, "the checkpoint");
    io_plan_input(&plan, input, "--input");
    if (vocab_path)
        io_plan_input(&plan, vocab_path, "--vocab");
    io_plan_output(&plan, out, "--out");
    io_plan_check(&plan);
    int max_len = max_len_text ? (int)cli_int("--max-len", max_len_text, 3, 1 << 14) : 128;

    LoadedModel lm;
    load_model_with_vocab(&lm, ckpt, vocab_path);
    const ModelConfig *c = &lm.cfg.model;
    const Model *model = &lm.model;
    const Tokenizer *tok = lm.tok;
    const char *ini = lm.config_ini;
    if (c->absolute_position && max_len > c->max_position)
        max_len = c->max_position;

    Sentences s = read_sentences(input, tok, max_len);
    const int B = s.count, heads = c->num_heads;
    int32_t *types = xcalloc((size_t)B * max_len, sizeof(int32_t)), *mask = xmalloc(sizeof(int32_t) * (size_t)B * max_len);
    for (int b = 0; b < B; b++)
        for (int l = 0; l < max_len; l++)
            mask[(size_t)b * max_len + l] = l < s.lengths[b];
    const Batch full = {B, max_len, s.ids, types, mask, NULL, NULL}; /* [B, max_len] */
    BatchLayout layout;
    batch_layout_create(&layout, B, max_len);
    const Batch batch = batch_relayout(&layout, &full, padding);
    const int L = batch.L;
    int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)B * L); /* [B, L] padded, as written */
    for (int b = 0; b < B; b++)
        memcpy(ids + (size_t)b * L, s.ids + (size_t)b * max_len, sizeof(int32_t) * (size_t)L);
    Activations acts;
    activations_create(&acts, model, B, L, 0, PRECISION_FP32);
    size_t map = (size_t)B * heads * L * L; /* at least the unpadded blocks' sum of heads L_b^2 */
    CarriedMaps carried = {c->residual_attention ? xalloc_floats((size_t)c->num_layers * map) : NULL, map};
    model_encode_observed(model, &acts, &batch, FORWARD_EVAL, 0, keep_carried, &carried);
    float *maps = xalloc_floats(map);

    char tmp[4096];
    hid_t o = h5_create_temp(out, tmp, sizeof tmp);
    hsize_t dims[4] = {(hsize_t)B, (hsize_t)L, (hsize_t)L, (hsize_t)L};
    h5_write_ints(o, "input_ids", ids, 2, dims);
    h5_write_ints(o, "lengths", s.lengths, 1, dims);
    char *tokens = token_text(&s, tok);
    h5_write_string(o, "tokens", tokens);
    hsize_t map_dims[4] = {(hsize_t)B, (hsize_t)heads, (hsize_t)L, (hsize_t)L};
    int table_rows = attention_table_rows(c->relative_position, c->relative_k);
    int table_cols = attention_table_cols(c->relative_position, c->hidden_size / heads);
    for (int l = 0; l < c->num_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "layer_%d/probs", l);
        padded_maps(maps, acts.layer[l].probs, &batch, heads);
        h5_write_floats(o, name, maps, 4, map_dims);
        if (carried.maps) {
            snprintf(name, sizeof name, "layer_%d/carried", l);
            padded_maps(maps, carried.maps + (size_t)l * map, &batch, heads);
            h5_write_floats(o, name, maps, 4, map_dims);
        }
        if (table_rows) {
            hsize_t table_dims[2] = {(hsize_t)table_rows, (hsize_t)table_cols};
            snprintf(name, sizeof name, "distance_embedding/layer_%d", l);
            h5_write_floats(o, name, model->p.layer[l].position_table, 2, table_dims);
        }
    }
    const PosScheme *scheme = pos_scheme(c->relative_position);
    if (acts.positions.bias2) { /* the bias by offset the forward added (t5, alibi) */
        hsize_t bias_dims[2] = {(hsize_t)heads, (hsize_t)(2 * L - 1)};
        h5_write_floats(o, "position_bias", acts.positions.bias2, 2, bias_dims);
    }
    if (scheme->table_scope == POS_TABLE_MODEL) { /* the model's one table (t5) */
        int rows, cols;
        pos_table_shape(c->relative_position, &(PosDims){.heads = heads, .t5_num_buckets = c->t5_num_buckets},
                        &rows, &cols);
        hsize_t model_table_dims[2] = {(hsize_t)rows, (hsize_t)cols};
        h5_write_floats(o, "relative_attention_bias", model->p.relative_attention_bias, 2, model_table_dims);
    }
    h5_attr_write_string(o, "config", ini);
    h5_attr_write_string(o, "checkpoint", ckpt);
    h5_attr_write_string(o, "relative_position", rel_kind_name(c->relative_position));
    h5_attr_write_int64(o, "relative_k", c->relative_k);
    h5_attr_write_int64(o, "t5_num_buckets", c->t5_num_buckets);
    h5_attr_write_int64(o, "t5_max_distance", c->t5_max_distance);
    h5_attr_write_int64(o, "residual_attention", c->residual_attention);
    h5_attr_write_int64(o, "residual_attention_mean", c->residual_attention_mean);
    h5_attr_write_int64(o, "num_layers", c->num_layers);
    h5_attr_write_int64(o, "num_heads", heads);
    h5_commit(o, tmp, out);
    rp_log("wrote %s: %d sentences of at most %d tokens (padding %s), %d layers x %d heads", out, B, L,
           padding_kind_name(padding), c->num_layers, heads);

    free(maps);
    batch_layout_free(&layout);
    free(tokens);
    free(carried.maps);
    activations_free(&acts);
    free(ids);
    free(types);
    free(mask);
    free(s.ids);
    free(s.lengths);
    loaded_model_free(&lm);
    return 0;
}
