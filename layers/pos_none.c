/* No relative positions: S_ij = scale * q_i.k_j (positions come from the absolute embeddings,
 * model.absolute_position, or not at all). The row every hook of which is empty. */
#include "layers/positions.h"

const PosScheme pos_none = {
    .adds_nothing = 1,
    .qk = POS_QK_PLAIN,
    .hf_type = "absolute",
};
