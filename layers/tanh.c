/* tanh, the pooler's activation: elementwise, backward from the saved output. */
#include "layers/layers.h"

#include <math.h>

void tanh_forward(float *out, const float *in, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t e = 0; e < n; e++)
        out[e] = tanhf(in[e]);
}

/* d tanh(x) / dx = 1 - tanh(x)^2 */
void tanh_backward(float *d_in, const float *d_out, const float *out, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t e = 0; e < n; e++)
        d_in[e] = d_out[e] * (1.0f - out[e] * out[e]);
}
