/* core/io/safetensors: exact F16/BF16 conversion of every bit pattern, writer -> reader round trip
 * (including an empty tensor), 8-byte data alignment. Malformed headers: tests/train/model/test_hf.sh. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/io/safetensors.h"
#include "tests/check.h"

/* IEEE half by its definition: (-1)^s 2^(e-15) (1 + m/1024), subnormal 2^-14 m/1024. */
static double half_value(uint16_t bits) {
    int sign = bits >> 15, e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
    double v = e == 0 ? ldexp(m / 1024.0, -14) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1 + m / 1024.0, e - 15);
    return sign ? -v : v;
}

static int same_float(float a, double b) {
    if (isnan(b))
        return isnan(a);
    return (double)a == b && !signbit(a) == !signbit(b);
}

int main(void) {
    TestTally t = {0, 0};
    int bad_half = 0, bad_bf16 = 0;
    for (uint32_t bits = 0; bits < 65536; bits++) {
        bad_half += !same_float(st_f16_to_float((uint16_t)bits), half_value((uint16_t)bits));
        uint32_t wide = bits << 16;
        float expect;
        memcpy(&expect, &wide, sizeof expect);
        float got = st_bf16_to_float((uint16_t)bits);
        bad_bf16 += memcmp(&got, &expect, sizeof got) != 0;
    }
    CHECK(&t, bad_half == 0, "F16 -> float exact for all 65536 bit patterns (zeros, subnormals, inf, NaN): %d wrong",
          bad_half);
    CHECK(&t, st_f16_to_float(0x0001) == ldexpf(1, -24) && st_f16_to_float(0x7bff) == 65504.0f &&
                  signbit(st_f16_to_float(0x8000)),
          "F16: smallest subnormal 2^-24, largest 65504, -0 keeps its sign");
    CHECK(&t, bad_bf16 == 0, "BF16 -> float = the bits shifted into the high half, all patterns: %d wrong", bad_bf16);

    char path[64];
    snprintf(path, sizeof path, "/tmp/realpos-st-%ld.safetensors", (long)getpid());
    float a[6] = {1, -2, 3.5f, 0, 1e-30f, -7}, b[3] = {0.25f, 0.5f, 0.75f};
    StWriteTensor tensors[3] = {{"a.weight", 2, {2, 3}, a}, {"empty", 2, {0, 4}, b}, {"b", 1, {3}, b}};
    const char *meta[] = {"format", "pt"};
    char why[512];
    CHECK(&t, st_write_floats(path, tensors, 3, meta, 1, why, sizeof why) == 0, "st_write_floats succeeds");
    StFile st;
    st_open(&st, path);
    const StTensor *ta = st_find(&st, "a.weight"), *te = st_find(&st, "empty"), *tb = st_find(&st, "b");
    CHECK(&t, st.count == 3 && ta && te && tb && ta->rank == 2 && ta->shape[0] == 2 && ta->shape[1] == 3 &&
                  te->numel == 0 && tb->numel == 3 && !strcmp(ta->dtype, "F32"),
          "written file reads back: names, ranks, shapes, an empty tensor, dtype F32");
    CHECK(&t, st.data_start % 8 == 0, "data buffer 8-byte aligned (header padded with spaces): starts at %llu",
          (unsigned long long)st.data_start);
    float ra[6], rb[3];
    st_read_floats(&st, ta, ra);
    st_read_floats(&st, tb, rb);
    CHECK(&t, !memcmp(ra, a, sizeof a) && !memcmp(rb, b, sizeof b), "values round-trip bit for bit");
    CHECK(&t, st_find(&st, "__metadata__") == NULL && st_find(&st, "missing") == NULL,
          "metadata is not a tensor; unknown names are NULL");
    st_close(&st);
    remove(path);
    return tally_exit(&t);
}
