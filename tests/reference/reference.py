#!/usr/bin/python3
"""Independent PyTorch reference for the realpos engine (the proof that the C code is right).

The model is written from the math in docs/checkpoint.md and layers/attention.h, never from the C
sources: the slow, obvious form (the relative terms materialise [L, L, d] tables), float64 by
default, gradients by autograd. Parameter names are HuggingFace BertForMaskedLM state_dict keys
with '.' -> '/'; they come from the module hierarchy in reference_model.py.

  dump        forward/backward, or S training steps (clipping, learning-rate schedule, AdamW, as
              `realpos dump --train-steps` runs the engine's training step), on a batch file
  make-batch  a random MLM batch file
  perturb     add seeded noise to every /model dataset of a checkpoint
  compare     PASS/FAIL per quantity between two dump files (tests/reference/compare.py)
  bench       time training steps of this model in float32 (tests/reference/reference_bench.py)
  selftest    internal consistency checks of this reference
  jobs FILE   run many of the above (one command line per line) in one process
"""
import argparse
import os
import shlex
import shutil
import sys

import h5py
import numpy as np
import torch

import compare  # tests/reference/compare.py (this script's directory is on sys.path)
from reference_config import IGNORE_LABEL, TRAIN_KEYS, load_config
from reference_io import BATCH_KEYS, load_batch, load_model, read_group
from reference_optim import adamw_step, clip_gradients, learning_rate
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import h5seal  # noqa: E402; scripts/h5seal.py: the checksum realpos verifies


def cmd_dump(args):
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    cfg, model = load_model(args.checkpoint, dtype)
    batch = load_batch(args.batch, cfg)
    model.eval()  # dropout off
    run = model.forward_per_sequence if args.per_sequence else model
    params = model.named_tensors()
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    with h5py.File(args.out, "w") as out:
        if args.train_steps == 0:
            loss, logits = run(batch)
            loss.backward()
            out["loss"] = float(loss)
            out["logits"] = logits.detach().numpy().astype(np_dtype)
            for name, p in params.items():
                out["grad/" + name] = p.grad.numpy().astype(np_dtype)
            return 0
        # the engine's training step: clip the gradient's global norm, the schedule's learning
        # rate, AdamW; a fresh optimizer (moments zero, step count 0; stored /optimizer state unused)
        missing = [k for k in TRAIN_KEYS if getattr(cfg, k) is None]
        if missing:
            sys.exit(f"{cfg.origin}: --train-steps needs the keys train.{', train.'.join(missing)}")
        S = args.train_steps
        m = {n: torch.zeros_like(p) for n, p in params.items()}
        v = {n: torch.zeros_like(p) for n, p in params.items()}
        losses, norms, lrs, max_grad = [], [], [], {n: 0.0 for n in params}
        for t in range(1, S + 1):
            model.zero_grad(set_to_none=True)
            loss, _ = run(batch)
            loss.backward()
            losses.append(float(loss))
            for n, p in params.items():
                max_grad[n] = max(max_grad[n], float(p.grad.abs().max()))
            grads = {n: p.grad for n, p in params.items()}
            norms.append(clip_gradients(grads, cfg.clip_grad_norm))
            lrs.append(learning_rate(cfg, t - 1, S))
            adamw_step(params, grads, m, v, t, cfg, lrs[-1])
        out["trajectory_loss"] = np.array(losses, dtype=np.float64)
        out["trajectory_grad_norm"] = np.array(norms, dtype=np.float64)
        out["trajectory_lr"] = np.array(lrs, dtype=np.float64)
        out.attrs["lr"], out.attrs["steps"] = cfg.lr, args.train_steps  # for compare.py
        for name, p in params.items():
            out["final/" + name] = p.detach().numpy().astype(np_dtype)
            out["final/" + name].attrs["max_abs_grad"] = max_grad[name]
    return 0


# ---- make-batch, perturb -------------------------------------------------------------------

def cmd_make_batch(args):
    cfg = load_config(args.config, args.set)
    B, L, rng = args.batch_size, args.seq_len, np.random.default_rng(args.seed)
    if cfg.absolute_position and L > cfg.max_position:
        sys.exit(f"--seq-len {L} exceeds max_position {cfg.max_position}")
    ids = rng.integers(0, cfg.vocab_size, (B, L))
    types = rng.integers(0, min(2, cfg.type_vocab_size), (B, L))
    mask = np.ones((B, L), dtype=np.int64)
    if args.lengths:  # row b: its first lengths[b] tokens real, the rest padding
        lengths = [int(n) for n in args.lengths.split(",")]
        if len(lengths) != B or not all(1 <= n <= L for n in lengths):
            sys.exit(f"--lengths {args.lengths}: expected {B} lengths in [1, {L}]")
        for b, n in enumerate(lengths):
            mask[b, n:] = 0
            ids[b, n:], types[b, n:] = 0, 0
    elif args.pad and L > 1:
        for b in range(1, B):  # row 0 stays full; row 1 is always padded, others at random
            if b == 1 or rng.random() < 0.5:
                real = int(rng.integers(max(1, L // 3), L))
                mask[b, real:] = 0
                ids[b, real:], types[b, real:] = 0, 0
    fraction = rng.uniform(0.15, 0.30)
    chosen = (rng.random((B, L)) < fraction) & (mask == 1)
    if not chosen.any():
        chosen[0, int(rng.integers(0, L))] = True
    labels = np.where(chosen, rng.integers(0, cfg.vocab_size, (B, L)), IGNORE_LABEL)
    with h5seal.create(args.out) as f:
        for key, value in zip(BATCH_KEYS, (ids, types, mask, labels)):
            f[key] = value.astype(np.int32)
    h5seal.seal(args.out)  # realpos reads only checksummed files
    return 0


def cmd_perturb(args):
    """Copy the checkpoint, adding scale * N(0, 1) noise to every /model dataset (name order)."""
    if os.path.abspath(args.checkpoint) != os.path.abspath(args.out):
        shutil.copyfile(args.checkpoint, args.out)
    rng = np.random.default_rng(args.seed)
    with h5py.File(args.out, "r+") as f:
        names = sorted(read_group(f, "model", args.out))
        for name in names:
            data = f["model/" + name]
            noise = args.scale * rng.standard_normal(data.shape)
            data[...] = (data[()].astype(np.float64) + noise).astype(data.dtype)
    h5seal.seal(args.out)  # refresh the checksum realpos verifies
    return 0


# ---- command line --------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dump")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--batch", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--train-steps", type=int, default=0)
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--per-sequence", action="store_true",
                   help="run each row's real tokens on their own (no padding, no mask)")
    p.set_defaults(run=cmd_dump)
    p = sub.add_parser("make-batch")
    p.add_argument("--config", required=True, help="INI file or checkpoint")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--pad", action="store_true")
    p.add_argument("--lengths", metavar="N,N,...", help="each row's real tokens (instead of --pad)")
    p.set_defaults(run=cmd_make_batch)
    p = sub.add_parser("perturb")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--scale", type=float, required=True)
    p.set_defaults(run=cmd_perturb)
    p = sub.add_parser("compare")
    p.add_argument("a", help="engine output (e.g. realpos dump)")
    p.add_argument("b", help="reference output")
    p.add_argument("--what", choices=("dump", "trajectory"), default="dump")
    p.add_argument("--summary", metavar="LABEL",
                   help="one PASS line for LABEL if everything passes (FAIL lines otherwise)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: A's products had bf16 operands (compare.BF16_TOLERANCES)")
    p.set_defaults(run=compare.main_args)
    p = sub.add_parser("bench")
    p.add_argument("--config", required=True)
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--label-frac", type=float, default=0.15)
    p.add_argument("--autocast-bf16", action="store_true",
                   help='forward under torch.autocast("cpu", dtype=torch.bfloat16): mixed precision')
    p.add_argument("--json")
    p.set_defaults(run=lambda a: __import__("reference_bench").cmd_bench(a))
    p = sub.add_parser("selftest")
    p.set_defaults(run=lambda a: __import__("reference_selftest").main())
    p = sub.add_parser("jobs", help="run one command line per line of FILE ('-' = stdin)")
    p.add_argument("file")
    p.set_defaults(run=cmd_jobs)
    return parser


def run_command(argv):
    """Run one command line; returns its exit status (errors become status 1, never a crash)."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.run(args) or 0)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(f"reference.py: error: {stop.code}", file=sys.stderr)
            return 1
        return int(stop.code or 0)
    except (OSError, KeyError, ValueError) as err:  # unreadable or malformed files
        print(f"reference.py: error: {' '.join(argv[:1])}: {err}", file=sys.stderr)
        return 1


def cmd_jobs(args):
    source = sys.stdin if args.file == "-" else open(args.file)
    failures = 0
    for line in source:
        argv = shlex.split(line, comments=True)
        if argv and run_command(argv) != 0:
            failures += 1
            print(f"reference.py: job failed: {line.strip()}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("REFERENCE_THREADS", "1")))
    sys.exit(run_command(sys.argv[1:]))
