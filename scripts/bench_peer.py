#!/usr/bin/python3
"""The peer of `make bench` (scripts/dev/bench.sh): full training steps (forward, backward, gradient
clipping, AdamW) of a BERT encoder in PyTorch 1.13, tuned for CPU (scripts/bench_peer_model.py says
how the model is written; docs/bench-peer.md how each setting measured). Two batch sources:
  MLM (default)      one random batch of B x L ids, every position real, --label-frac of them
                     labelled, reused every step (as `realpos bench` does);
  --tagging FILE     the token-classification tagger of a CoNLL-style file ('word label' lines,
                     blank lines between examples: the vocabulary and label set are the file's),
                     steps of the shapes `realpos bench --lengths-from FILE` trained, read from its
                     JSON (--shapes-from): B sequences padded to the step's longest L, the
                     step's real tokens labelled (the rest padding, masked in attention).
Settings: torch.set_num_threads(--threads); bf16 under torch.autocast('cpu', torch.bfloat16)
(--autocast-bf16); AdamW with foreach=True (the multi-tensor kernel; torch 1.13 has no CPU fused
AdamW); clip_grad_norm_ over every gradient when train.clip_grad_norm > 0, as realpos clips. The
caller preloads tcmalloc and sets OMP_WAIT_POLICY=PASSIVE (bench.sh does).
Usage: bench_peer.py --config INI [--set k=v]... --batch-size B --seq-len L --steps N
       [--warmup W] [--threads T] [--label-frac F] [--autocast-bf16] [--tagging FILE --shapes-from
       JSON] [--no-foreach] [--json OUT]"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from reference_bench import host_info  # noqa: E402  (CPU model, OpenBLAS core, OPENBLAS_CORETYPE)
from reference_config import load_config  # noqa: E402
from bench_peer_model import PeerBert, weight_decay_groups  # noqa: E402


def read_tagging(path):
    """(vocabulary size with 5 specials, label count, fraction of words scored) of a CoNLL file;
    the label '_' marks a word that is not scored (the synthetic tasks' inputs), as realpos reads it."""
    words, labels, lengths, n, scored = set(), set(), [], 0, 0
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    if n:
                        lengths.append(n)
                    n = 0
                    continue
                if len(parts) < 2:
                    sys.exit(f"{path}:{number}: expected 'word label', got {line.strip()!r}")
                words.add(parts[0])
                if parts[-1] != "_":
                    labels.add(parts[-1])
                    scored += 1
                n += 1
    except OSError as err:
        sys.exit(f"--tagging {path}: {err.strerror}")
    if n:
        lengths.append(n)
    if not lengths or not labels:
        sys.exit(f"--tagging {path}: no labelled examples")
    return len(words) + 5, len(labels), scored / sum(lengths)


def tagging_shapes(path, steps):
    """[(padded length, real tokens)] of the timed steps of a realpos bench JSON."""
    try:
        with open(path) as f:
            run = json.load(f)
        lengths, real = run["batch_lengths"], run["step_real_tokens"]
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f"--shapes-from {path}: expected a realpos bench JSON with batch_lengths and "
                 f"step_real_tokens: {err}")
    if len(lengths) < steps or len(real) < steps:
        sys.exit(f"--shapes-from {path}: {len(lengths)} steps, --steps {steps} asked")
    return list(zip(lengths, real))[:steps]


def tagging_batch(B, L, real, num_labels, vocab, scored, generator):
    """B rows padded to L holding `real` real tokens ([CLS] .. [SEP] each), the last fraction
    `scored` of the words of each row labelled (the synthetic tasks score the answer's words)."""
    per_row = [real // B + (b < real % B) for b in range(B)]
    ids = torch.randint(5, vocab, (B, L), generator=generator)
    labels = torch.randint(0, num_labels, (B, L), generator=generator)
    mask = torch.zeros(B, L)
    for b, n in enumerate(per_row):
        mask[b, :n] = 1
        words = max(n - 2, 0)
        labels[b, :1 + words - round(scored * words)] = -100
        labels[b, max(n - 1, 0):] = -100
    return ids, labels, ((1.0 - mask) * -10000.0).view(B, 1, 1, L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--label-frac", type=float, default=0.15)
    ap.add_argument("--autocast-bf16", action="store_true")
    ap.add_argument("--tagging")
    ap.add_argument("--shapes-from")
    ap.add_argument("--no-foreach", action="store_true", help="the per-tensor AdamW (for measuring)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if bool(args.tagging) != bool(args.shapes_from):
        sys.exit("bench_peer: --tagging FILE and --shapes-from JSON go together")
    torch.set_num_threads(args.threads)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    B, L = args.batch_size, args.seq_len
    if args.tagging:
        vocab, num_labels, scored = read_tagging(args.tagging)
        cfg = load_config(args.config, args.set + [f"model.vocab_size={vocab}"])
        shapes = tagging_shapes(args.shapes_from, args.steps)
        model = PeerBert(cfg, "tagging", num_labels)
        batches = [tagging_batch(B, n, real, num_labels, vocab, scored, generator) for n, real in shapes]
    else:
        cfg = load_config(args.config, args.set)
        ids = torch.randint(0, cfg.vocab_size, (B, L), generator=generator)
        labelled = torch.rand((B, L), generator=generator) < args.label_frac
        labels = torch.where(labelled, torch.randint(0, cfg.vocab_size, (B, L), generator=generator),
                             torch.full((B, L), -100))
        shapes, batches = [(L, B * L)] * args.steps, [(ids, labels, None)] * args.steps
        model = PeerBert(cfg, "mlm")
    model.train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(weight_decay_groups(model, cfg.weight_decay), lr=cfg.lr,
                                  betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, foreach=not args.no_foreach)
    clip = cfg.clip_grad_norm if cfg.clip_grad_norm is not None else 1.0

    def train_step(batch):
        ids, labels, mask_add = batch
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast_bf16):
            loss = model(ids, torch.zeros_like(ids), mask_add, labels)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return float(loss)

    for w in range(args.warmup):
        train_step(batches[w % len(batches)])
    step_seconds, cpu_start = [], time.process_time()
    for batch in batches:
        t0 = time.perf_counter()
        loss = train_step(batch)
        step_seconds.append(time.perf_counter() - t0)
    seconds, cpu_seconds = sum(step_seconds), time.process_time() - cpu_start
    real, padded = sum(r for _, r in shapes), sum(B * n for n, _ in shapes)
    result = dict(
        engine="pytorch-tuned-peer", torch=torch.__version__, threads=args.threads,
        torch_threads=torch.get_num_threads(), config=args.config, overrides=args.set, batch_size=B,
        seq_len=L, steps=args.steps, warmup=args.warmup, label_frac=args.label_frac,
        precision="bf16-autocast" if args.autocast_bf16 else "fp32", adamw_foreach=not args.no_foreach,
        clip_grad_norm=clip, relative_position=cfg.relative_position,
        residual_attention=cfg.residual_attention, tagging=args.tagging,
        seconds_per_step=seconds / args.steps, tokens_per_s=real / seconds, real_tokens=real,
        computed_tokens_per_s=padded / seconds, batch_lengths=[n for n, _ in shapes],
        step_seconds=step_seconds, median_step_s=statistics.median(step_seconds),
        cpu_seconds_per_step=cpu_seconds / args.steps,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        rss_after_import_mb=rss_before / 1024.0, last_loss=loss,
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), ld_preload=os.environ.get("LD_PRELOAD"),
        **host_info())
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
