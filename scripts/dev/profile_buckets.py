"""Bucket `perf report --sort dso,symbol --stdio -F overhead,dso,sym` (standard input) into the
parts of a training step; print each part's share of the step's samples (start-up excluded).
Used by scripts/dev/profile_step.sh. The first matching rule wins; rules match the symbol unless
they name a DSO."""
import re
import sys

# (part, DSO regex or None, symbol regex)
RULES = [
    ("start-up (excluded)", None, r"rng_normal|__cos_fma|__ieee754_log|^log@|probe_gflops|init_|_dl_|"
                                  r"gemm_bf16_shapes_gflops|sgemm_probe"),
    ("products: oneDNN bf16", r"^\[JIT\]|libdnnl", r"."),
    ("products: OpenBLAS fp32", r"libopenblas", r"."),
    ("products: gemm_small fp32 (core/gemm_small.h)", None, r"^block_\d|^gemm_small|^pack_rows|^pack_transposed"),
    ("attention: bf16 roundings of Q, K, V, dctx, P, dS", None, r"^attn_to_bf16"),
    ("attention: scores, masks, softmax, relative terms", None,
     r"attention|attn_|softmax|_expf|^pos_|relpos|shaw|method[1-4]|alibi|rope|t5_|gather|scatter|varlen|_bh\b|table_grads"),
    ("GELU", None, r"gelu|_erff"),
    ("layer norms (with the residual add)", None, r"layernorm|^(residual_)?forward_rows\b|^(residual_)?backward_passes\b|^column_block_|^group_grad_means"),
    ("operand conversions (bf16_convert)", None, r"bf16_convert|gemm_convert"),
    ("dropout", None, r"dropout"),
    ("AdamW, gradient norm", None, r"adamw|^span_(avx512|portable)\b|grad_sum_squares|grad_clip"),
    ("loss (cross-entropy, MLM head)", None, r"crossentropy|mlm_head|row_grad_means|loss|^backward_bias_pass\b"),
    ("embeddings", None, r"embedding"),
    ("bias gradients", None, r"bias_backward|^bias_sums\b"),
    ("memset / memcpy", r"libc", r"mem(move|set|cpy)"),
    ("memset / memcpy", None, r"^fill_rows\b"),  # the linear's bias rows (layers/linear.c)
    ("kernel (page faults, scheduling, futex)", r"kernel|vdso", r"."),
    ("OpenMP runtime", r"libgomp", r"."),
]


def main():
    shares = {}
    for line in sys.stdin:
        m = re.match(r"\s*([\d.]+)%\s+(\S+(?: tid \d+)?)\s+\[.\]\s+(.*\S)", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
        part = "other"
        for name, dso_re, sym_re in RULES:
            if (dso_re is None or re.search(dso_re, dso)) and re.search(sym_re, sym):
                if dso_re is None and not dso.startswith("realpos") and not re.match(r"lib(mvec|m)\.", dso):
                    continue  # a realpos symbol rule never claims another library's function
                part = name
                break
        shares[part] = shares.get(part, 0.0) + pct
    start = shares.pop("start-up (excluded)", 0.0)
    step = sum(shares.values())
    print(f"{'part of the step':<52} {'% of step samples':>18}")
    for name, pct in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"{name:<52} {100 * pct / step:>17.1f}%")
    print(f"(start-up: {start:.1f}% of all samples, left out)")


if __name__ == "__main__":
    main()
