#!/usr/bin/python3
"""Compare an engine output A (e.g. `realpos dump`, float32) with a reference output B
(tests/reference/reference.py dump, float64): one `PASS name ...` / `FAIL name ...` line per quantity.
Tolerances and their justification: docs/checkpoint.md, "Parity test".

  compare.py A.h5 B.h5 [--what dump|logits|trajectory] [--summary LABEL] [--precision fp32|bf16]

--precision bf16: A's matrix products had bf16 operands (train.precision = bf16); the tolerances
are BF16_TOLERANCES (docs/bf16.md, "Tolerances").
"""
import argparse
import sys

import h5py
import numpy as np

LOSS_REL_TOL = 1e-5          # dump: |loss_a - loss_b| <= tol * |loss_b|
TENSOR_TOL = 1e-4            # dump: max|a - b| <= tol * scale, per tensor (logits, each gradient)
BIAS_FLOOR = 0.1             # a bias: scale = max(max|b|, BIAS_FLOOR * max|b| of its weight)
TRAJ_LOSS_REL_TOL = 1e-4     # trajectory: each step's loss
TRAJ_PARAM_TOL = 1e-2        # trajectory: max|a - b| <= tol * lr * S per final parameter, where
                             # lr * S bounds how far S AdamW steps move a parameter ...
ZERO_GRAD = 1e-9             # ... and tol = 1 for tensors whose reference gradient stayed below
                             # ZERO_GRAD times the largest (zero in exact arithmetic)
FP32_TOLERANCES = {"loss": LOSS_REL_TOL, "tensor": TENSOR_TOL, "traj_loss": TRAJ_LOSS_REL_TOL,
                   "traj_param": TRAJ_PARAM_TOL}
# bf16 operands carry a relative rounding error of at most u = 2^-8 each, a product of two 2u =
# 7.8e-3; a value at the end of a chain of c products (forward and backward through 2 layers and the
# head: c <= 8) is within about c 2u = 6e-2 of exact relative to its tensor's scale, the bound taken
# here; measured worst over the grid ~1.5e-2 (docs/bf16.md). The loss is an average of M log-softmax
# terms whose errors partly cancel: 5e-3 relative. A trajectory: AdamW's step lr m / sqrt(v) is
# scale-free, so where a gradient is as small as its bf16 noise the update can differ by up to lr
# per step (the word embeddings' rows of tokens outside the batch get only the decoder's small
# gradient): the final parameters within 0.5 lr S (measured worst 0.36), each step's loss 1e-2.
BF16_TOLERANCES = {"loss": 5e-3, "tensor": 6e-2, "traj_loss": 1e-2, "traj_param": 0.5}


def _datasets(f, group):
    out = {}
    if group in f:
        f[group].visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset)
                            else None)
    return out


def _tensor_check(name, a, b, tol, scale):
    """(ok, line) for max|a - b| <= tol * scale."""
    if a.shape != b.shape:
        return False, f"{name} shape {a.shape} vs {b.shape}"
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not np.isfinite(a).all():
        return False, f"{name} has non-finite values"
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    rel = err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))
    return rel <= tol, f"{name} max_abs_err={err:.3e} rel_err={rel:.3e} (tol {tol:g})"


def _scalar_check(name, a, b, tol):
    a, b = float(a), float(b)
    rel = abs(a - b) / max(abs(b), 1e-30)
    return np.isfinite(a) and rel <= tol, f"{name} a={a:.10g} b={b:.10g} rel_err={rel:.3e} " \
                                          f"(tol {tol:g})"


def _tol_fraction(line):
    """rel_err / tol of a check line."""
    rel = float(line.split("rel_err=")[1].split()[0])
    return rel / float(line.split("(tol ")[1].rstrip(")"))


def compare_logits(fa, fb, tol=FP32_TOLERANCES):
    """Loss and logits only (e.g. against tests/reference/hf_reference.py logits, which has no gradients)."""
    return compare_dump(fa, fb, with_grads=False, tol=tol)


def compare_dump(fa, fb, with_grads=True, tol=FP32_TOLERANCES):
    checks = []
    for key in ("loss", "logits"):
        if key not in fa or key not in fb:
            return [(False, f"{key} missing in {'A' if key not in fa else 'B'}")]
    checks.append(_scalar_check("loss", fa["loss"][()], fb["loss"][()], tol["loss"]))
    logits_b = fb["logits"][()]
    checks.append(_tensor_check("logits", fa["logits"][()], logits_b, tol["tensor"],
                                float(np.max(np.abs(logits_b))) if logits_b.size else 0.0))
    if not with_grads:
        return checks
    ga, gb = _datasets(fa, "grad"), _datasets(fb, "grad")
    if not gb:
        return checks + [(False, "grad group missing or empty in B")]
    for name in sorted(set(ga) ^ set(gb)):
        checks.append((False, f"grad/{name} present only in {'A' if name in ga else 'B'}"))
    common = sorted(set(ga) & set(gb))
    maxima = {n: float(np.max(np.abs(gb[n][()]))) if gb[n].size else 0.0 for n in common}
    for name in common:
        sibling = name[: -len("bias")] + "weight"
        floor = BIAS_FLOOR * maxima[sibling] if name.endswith("/bias") and sibling in maxima \
            else 0.0
        checks.append(_tensor_check("grad/" + name, ga[name][()], gb[name][()], tol["tensor"],
                                    max(maxima[name], floor)))
    return checks


def compare_trajectory(fa, fb, tol=FP32_TOLERANCES):
    checks = []
    if "trajectory_loss" not in fa or "trajectory_loss" not in fb:
        return [(False, "trajectory_loss missing")]
    la, lb = fa["trajectory_loss"][()], fb["trajectory_loss"][()]
    if la.shape != lb.shape:
        return [(False, f"trajectory_loss shape {la.shape} vs {lb.shape}")]
    for step, (x, y) in enumerate(zip(la, lb)):
        checks.append(_scalar_check(f"loss[{step}]", x, y, tol["traj_loss"]))
    # the step's gradient norm (before clipping) as the loss; its learning rate exactly (the same
    # float32 formula on both sides: any difference is >= 6e-8 relative)
    for key, what, rel in (("trajectory_grad_norm", "grad_norm", tol["traj_loss"]), ("trajectory_lr", "lr", 1e-9)):
        if key not in fa or key not in fb or fa[key].shape != la.shape or fb[key].shape != lb.shape:
            checks.append((False, f"{key} missing or of another length"))
            continue
        for step, (x, y) in enumerate(zip(fa[key][()], fb[key][()])):
            checks.append(_scalar_check(f"{what}[{step}]", x, y, rel))
    pa, pb = _datasets(fa, "final"), _datasets(fb, "final")
    if not pb:
        return checks + [(False, "final group missing or empty in B")]
    for name in sorted(set(pa) ^ set(pb)):
        checks.append((False, f"final/{name} present only in {'A' if name in pa else 'B'}"))
    if "lr" not in fb.attrs or "steps" not in fb.attrs:
        return checks + [(False, "B lacks the lr and steps attributes (not a reference output)")]
    reach = float(fb.attrs["lr"]) * int(fb.attrs["steps"])
    common = sorted(set(pa) & set(pb))
    largest_grad = max(float(pb[n].attrs.get("max_abs_grad", 0.0)) for n in common)
    for name in common:
        if float(pb[name].attrs.get("max_abs_grad", np.inf)) <= ZERO_GRAD * largest_grad:
            # pure float32 noise g drives Adam by lr * g / (sqrt(v) + eps) <= ~lr per step
            checks.append(_tensor_check(f"final/{name} (zero gradient)", pa[name][()],
                                        pb[name][()], 1.0, reach))
        else:
            checks.append(_tensor_check("final/" + name, pa[name][()], pb[name][()],
                                        tol["traj_param"], reach))
    return checks


def main_args(args):
    with h5py.File(args.a, "r") as fa, h5py.File(args.b, "r") as fb:
        checks = {"dump": compare_dump, "logits": compare_logits,
                  "trajectory": compare_trajectory}[args.what](
            fa, fb, tol=BF16_TOLERANCES if args.precision == "bf16" else FP32_TOLERANCES)
    failed = [line for ok, line in checks if not ok]
    if args.summary:
        for line in failed:
            print(f"FAIL {args.summary}: {line}")
        if not failed:
            worst = max((line for ok, line in checks if "rel_err=" in line), key=_tol_fraction)
            print(f"PASS {args.summary}: {len(checks)} quantities, worst {worst}")
    else:
        for ok, line in checks:
            print(f"{'PASS' if ok else 'FAIL'} {line}")
    sys.stdout.flush()
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="engine output (e.g. realpos dump)")
    parser.add_argument("b", help="reference output")
    parser.add_argument("--what", choices=("dump", "logits", "trajectory"), default="dump")
    parser.add_argument("--summary", metavar="LABEL")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    return main_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
