/* A padded batch laid out again as data.padding / task.padding ask (model.h gives the layouts):
 *   max_length  as it is, [B, L]
 *   longest     its rows cut to the longest row's real tokens, [B, L'] (L' = that length)
 *   none        unpadded: the real tokens of row b, rows offsets[b] .. offsets[b+1]-1, back to
 *               back ([T] each), L' as longest (the dropout numbering: both draw the same masks)
 * Every row's real tokens must be a prefix of it (attention_mask 1 ... 1 0 ... 0) and at least
 * a padding row (all padding, e.g. the last batch of an evaluation: none gives it 0 rows) or the
 * first; the same sequences and labels in the same order, whatever the layout. The buffers are
 * laid out once for [B, L] at most: nothing is allocated per batch. */
#pragma once

#include "train/config/config.h"
#include "train/model/model.h"

typedef struct {
    int max_B, max_L;
    int *input_ids, *token_type_ids, *attention_mask, *labels; /* [max_B * max_L] */
    int *offsets;                                              /* [max_B + 1] */
    long real_tokens, longest_tokens, full_tokens; /* running totals over the batches laid out: the real
                                                    * tokens, and the rows of the longest and max_length
                                                    * layouts (the padding share saved) */
} BatchLayout;

void batch_layout_create(BatchLayout *l, int max_B, int max_L);
void batch_layout_free(BatchLayout *l);

/* `padded` (offsets NULL, attention_mask set) in layout `kind`: the result points into l's
 * buffers (max_length: at padded's own). */
Batch batch_relayout(BatchLayout *l, const Batch *padded, PaddingKind kind);

/* The layouts' config names (padding_names in train/config/schema.c's order). */
const char *padding_kind_name(PaddingKind kind);
/* The layout named `text` (none, longest, max_length); fatal naming `what` (e.g. "--padding")
 * otherwise. */
PaddingKind padding_kind_parse(const char *text, const char *what);
