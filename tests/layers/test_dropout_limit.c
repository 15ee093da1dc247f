/* A dropout key covers at most 2^32 mask indices (core/rng.h dropout_indices_fit; its boundary is
 * checked in tests/core/test_rng.c): every op that draws a mask refuses a larger one, naming its
 * shape, before it touches a buffer. Each case runs in a child process (RP_CHECK exits) on
 * buffers that do not exist (NULL): a refusal exits 1 with the message; a missing check would
 * read or write them and die by a signal. The shapes, one past 2^32 elements:
 *   dropout_forward / dropout_backward  n = 2^32 + 1
 *   residual_layernorm_forward, _backward, dropout_bias_backward
 *                                       [N, C] = [65537, 65536] (2^32 + 2^16)
 *   attention_forward / _backward       B x heads x L x L = 1 x 1 x 65537^2 (2^32 + 2^17 + 1) */
#include <stdint.h>

#include "layers/attention.h"
#include "layers/layers.h"
#include "tests/check.h"
#include "tests/child.h"

typedef enum {
    DROPOUT_FORWARD, DROPOUT_BACKWARD, RESIDUAL_LAYERNORM, RESIDUAL_LAYERNORM_BACKWARD,
    DROPOUT_BIAS_BACKWARD, ATTENTION_FORWARD, ATTENTION_BACKWARD
} Site;

static const AttnShape too_many_scores = {.B = 1, .L = 65537, .H = 64, .num_heads = 1, .rel = REL_NONE,
                                          .dropout = 0.1f, .threads = 1};

static void call(const void *arg) {
    switch (*(const Site *)arg) {
    case DROPOUT_FORWARD: dropout_forward(NULL, NULL, (size_t)UINT32_MAX + 2, 0.1f, 7); break;
    case DROPOUT_BACKWARD: dropout_backward(NULL, NULL, (size_t)UINT32_MAX + 2, 0.1f, 7); break;
    case RESIDUAL_LAYERNORM:
        residual_layernorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 65537, 65536, 1e-12f,
                                   0.1f, 7);
        break;
    case RESIDUAL_LAYERNORM_BACKWARD: { /* d_branch non-NULL asks for the mask; never touched */
        static float untouched;
        residual_layernorm_backward(NULL, &untouched, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                    NULL, 65537, 65536, 0.1f, 7);
        break;
    }
    case DROPOUT_BIAS_BACKWARD: dropout_bias_backward(NULL, NULL, NULL, 65537, 65536, 0.1f, 7); break;
    case ATTENTION_FORWARD:
        attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &too_many_scores, 7);
        break;
    case ATTENTION_BACKWARD:
        attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &too_many_scores, 7);
        break;
    }
}

/* Run the call in a child; PASS if it exits 1 (not by a signal) with `message` on stderr. */
static void expect_refusal(TestTally *t, const char *name, Site site, const char *message) {
    ChildResult r = child_run(call, &site);
    char why[1400];
    CHECK(t, child_refused(&r, message, why, sizeof why), "%s is refused before any buffer is touched%s", name, why);
}

int main(void) {
    TestTally t = {0};
    expect_refusal(&t, "dropout_forward of 2^32 + 1 elements", DROPOUT_FORWARD,
                   "dropout: 4294967297 elements exceed one key's 2^32 mask indices");
    expect_refusal(&t, "dropout_backward of 2^32 + 1 elements", DROPOUT_BACKWARD,
                   "dropout: 4294967297 elements exceed one key's 2^32 mask indices");
    expect_refusal(&t, "residual_layernorm_forward of [65537, 65536] with p = 0.1", RESIDUAL_LAYERNORM,
                   "residual_layernorm: [65537, 65536] exceeds one dropout key's 2^32 mask indices");
    expect_refusal(&t, "residual_layernorm_backward of [65537, 65536] with p = 0.1", RESIDUAL_LAYERNORM_BACKWARD,
                   "residual_layernorm_backward: [65537, 65536] exceeds one dropout key's 2^32 mask indices");
    expect_refusal(&t, "dropout_bias_backward of [65537, 65536] with p = 0.1", DROPOUT_BIAS_BACKWARD,
                   "dropout: [65537, 65536] exceeds one key's 2^32 mask indices");
    expect_refusal(&t, "attention_forward of 1 x 1 x 65537 x 65537 scores with dropout 0.1", ATTENTION_FORWARD,
                   "attention: B=1 x heads=1 x L=65537 x L exceeds one dropout key's 2^32 mask indices");
    expect_refusal(&t, "attention_backward of the same", ATTENTION_BACKWARD,
                   "attention: B=1 x heads=1 x L=65537 x L exceeds one dropout key's 2^32 mask indices");
    return tally_exit(&t);
}
