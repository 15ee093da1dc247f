/* Re-laying padded batches out (batch_layout.h). */
#include "train/model/batch_layout.h"

#include <string.h>

#include "core/common.h"

void batch_layout_create(BatchLayout *l, int max_B, int max_L) {
    memset(l, 0, sizeof *l);
    const size_t n = (size_t)max_B * (size_t)max_L;
    l->max_B = max_B, l->max_L = max_L;
    l->input_ids = xcalloc(n, sizeof(int));
    l->token_type_ids = xcalloc(n, sizeof(int));
    l->attention_mask = xcalloc(n, sizeof(int));
    l->labels = xcalloc(n, sizeof(int));
    l->offsets = xcalloc((size_t)max_B + 1, sizeof(int));
}

void batch_layout_free(BatchLayout *l) {
    free(l->input_ids), free(l->token_type_ids), free(l->attention_mask), free(l->labels), free(l->offsets);
    memset(l, 0, sizeof *l);
}

const char *padding_kind_name(PaddingKind kind) {
    return kind == PAD_NONE ? "none" : kind == PAD_LONGEST ? "longest" : "max_length";
}

PaddingKind padding_kind_parse(const char *text, const char *what) {
    const PaddingKind kinds[] = {PAD_NONE, PAD_LONGEST, PAD_MAX_LENGTH};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(text, padding_kind_name(kinds[i])))
            return kinds[i];
    RP_FATAL("%s: expected none, longest or max_length, got '%s'", what, text);
}

/* Real tokens of row b: its attention mask's prefix of ones (fatal if ones follow a zero). */
static int row_length(const Batch *p, int b) {
    const int *mask = p->attention_mask + (size_t)b * p->L;
    int len = 0;
    while (len < p->L && mask[len])
        len++;
    for (int i = len; i < p->L; i++)
        RP_CHECK(!mask[i], "batch layout: row %d of the batch has a real token at %d after padding at %d "
                 "(expected its real tokens first)", b, i, len);
    return len; /* 0: a padding row (the last batch of an evaluation) */
}

Batch batch_relayout(BatchLayout *l, const Batch *p, PaddingKind kind) {
    RP_CHECK(!p->offsets && p->attention_mask, "internal: batch_relayout takes a padded batch");
    RP_CHECK(p->B <= l->max_B && p->L <= l->max_L, "internal: batch [%d, %d] over the layout's [%d, %d]",
             p->B, p->L, l->max_B, l->max_L);
    int longest = 0;
    l->offsets[0] = 0;
    for (int b = 0; b < p->B; b++) {
        const int len = row_length(p, b);
        longest = len > longest ? len : longest;
        l->offsets[b + 1] = l->offsets[b] + len;
    }
    RP_CHECK(longest >= 1, "batch layout: a batch of %d rows without a real token", p->B);
    l->real_tokens += l->offsets[p->B];
    l->longest_tokens += (long)p->B * longest;
    l->full_tokens += (long)p->B * p->L;
    if (kind == PAD_MAX_LENGTH)
        return *p;
    Batch out = {p->B, longest, l->input_ids, l->token_type_ids, kind == PAD_NONE ? NULL : l->attention_mask,
                 p->labels ? l->labels : NULL, kind == PAD_NONE ? l->offsets : NULL};
    for (int b = 0; b < p->B; b++) {
        /* none: row b's real tokens at offsets[b]; longest: the row's first `longest` at b*longest */
        const size_t from = (size_t)b * p->L;
        const size_t to = kind == PAD_NONE ? (size_t)l->offsets[b] : (size_t)b * longest;
        const size_t count = kind == PAD_NONE ? (size_t)(l->offsets[b + 1] - l->offsets[b]) : (size_t)longest;
        memcpy(l->input_ids + to, p->input_ids + from, count * sizeof(int));
        memcpy(l->token_type_ids + to, p->token_type_ids + from, count * sizeof(int));
        memcpy(l->attention_mask + to, p->attention_mask + from, count * sizeof(int));
        if (p->labels)
            memcpy(l->labels + to, p->labels + from, count * sizeof(int));
    }
    return out;
}
