#!/usr/bin/python3
"""Self-checks of tests/reference/reference.py and its modules (reference_*.py) that need no C
engine (run: reference.py selftest). One PASS/FAIL line per check.

  - the relative scores equal HuggingFace's relative_key / relative_key_query formulas (a second,
    differently indexed write-up) when k >= L-1, so that truncation never applies
  - the gathered (bench) form of the shaw/method4 scores equals the materialised form
  - autograd gradients agree with central finite differences along a random direction
  - a padded row gives the same loss terms as the same row alone without padding, and the
    per-sequence forward (dump --per-sequence) the padded forward's loss, logits and gradients
  - residual attention with one layer equals plain attention
  - the hand-written AdamW step equals torch.optim.AdamW
  - float32 and float64 reference dumps agree under compare.py (the whole file pipeline), and a
    mode swap (method4 -> shaw) is detected
  - loading rejects a checkpoint with a wrong shape"""
import contextlib
import io
import math
import os
import sys
import tempfile
import types

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import reference as ref  # noqa: E402; the commands (run_command, cmd_make_batch)
from reference_config import IGNORE_LABEL, REL_MODES, Config  # noqa: E402
from reference_io import load_batch  # noqa: E402
from reference_model import BertForMaskedLM, SelfAttention, decays  # noqa: E402
from reference_optim import adamw_step  # noqa: E402

BASE_INI = """[model]
hidden_size = 16
num_layers = 2
num_heads = 2
intermediate_size = 24
vocab_size = 30
max_position = 16
type_vocab_size = 2
absolute_position = {absolute}
norm = {norm}
hidden_dropout = 0.1
attention_dropout = 0.1
layer_norm_eps = 1e-12
init_range = 0.02
relative_position = {rel}
relative_k = {k}
t5_num_buckets = 8
t5_max_distance = 12
rope_theta = 10000
residual_attention = {residual}
residual_attention_mean = {mean}
[optim]
lr = 1e-3
beta1 = 0.9
beta2 = 0.999
eps = 1e-6
weight_decay = 0.01
bias_correction = yes
"""


def make_config(rel="none", k=3, norm="post", absolute="yes", residual="no", mean="no"):
    return BASE_INI.format(rel=rel, k=k, norm=norm, absolute=absolute, residual=residual,
                           mean=mean)


def random_model(text, seed, dtype=torch.float64):
    """Model with every parameter random (none at a trivial value)."""
    cfg = Config(text, "selftest")
    model = BertForMaskedLM(cfg).to(dtype)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_tensors().items():
            base = 1.0 if ("LayerNorm" in name and name.endswith("weight")) else 0.0
            p.copy_(base + 0.3 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return cfg, model


def write_checkpoint(path, text, seed):
    _, model = random_model(text, seed)
    with h5py.File(path, "w") as f:
        f.attrs["format"], f.attrs["version"], f.attrs["config"] = "realpos", 1, text
        for name, p in model.named_tensors().items():
            f["model/" + name] = p.detach().numpy().astype(np.float32)


def random_batch(cfg, B, L, seed, pad=True):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batch.h5")
        args = types.SimpleNamespace(config=None, set=[], batch_size=B, seq_len=L, seed=seed,
                                     out=path, pad=pad, lengths=None)
        original, ref.load_config = ref.load_config, lambda *_: cfg
        try:
            ref.cmd_make_batch(args)
        finally:
            ref.load_config = original
        return load_batch(path, cfg)


class Tally:
    def __init__(self):
        self.failed = 0

    def check(self, ok, message):
        print(f"{'PASS' if ok else 'FAIL'} reference selftest: {message}")
        self.failed += not ok


def hf_scores(q, k, table, trunc, mode, max_position):
    """HuggingFace BertSelfAttention (relative_key = shaw, relative_key_query = method4):
    table rows indexed by distance + max_position - 1, no truncation."""
    L = q.shape[2]
    hf_table = torch.stack([table[max(-trunc, min(trunc, dist)) + trunc]
                            for dist in range(-(max_position - 1), max_position)])
    distance = torch.arange(L).view(-1, 1) - torch.arange(L).view(1, -1)
    emb = hf_table[distance + max_position - 1]
    scores = torch.matmul(q, k.transpose(-1, -2))
    scores = scores + torch.einsum("bhld,lrd->bhlr", q, emb)
    if mode == "method4":
        scores = scores + torch.einsum("bhrd,lrd->bhlr", k, emb)
    return scores / math.sqrt(q.shape[-1])


def check_scores(t):
    gen = torch.Generator().manual_seed(1)
    L = 7
    for mode in ("shaw", "method4"):
        for trunc in (L - 1, L + 4):
            cfg, model = random_model(make_config(rel=mode, k=trunc), 2)
            attn = model.bert.encoder.layer[0].attention.self
            q, k = (torch.randn(2, 2, L, 8, generator=gen, dtype=torch.float64) for _ in "qk")
            table = attn.distance_embedding.weight
            err = (attn.scores(q, k) - hf_scores(q, k, table, trunc, mode, 16)).abs().max()
            t.check(err < 1e-12, f"{mode} k={trunc} scores = HF formula (err {err:.1e})")
        for trunc in (2, L + 4):
            cfg, model = random_model(make_config(rel=mode, k=trunc), 3)
            attn = model.bert.encoder.layer[0].attention.self
            q, k = (torch.randn(2, 2, L, 8, generator=gen, dtype=torch.float64) for _ in "qk")
            slow = attn.scores(q, k)
            attn.efficient = True
            err = (attn.scores(q, k) - slow).abs().max()
            t.check(err < 1e-12, f"{mode} k={trunc} gathered scores = materialised ({err:.1e})")


def check_finite_differences(t):
    for rel in REL_MODES:
        for norm, residual in (("post", "yes"), ("pre", "no")):
            cfg, model = random_model(make_config(rel=rel, norm=norm, residual=residual), 4)
            batch = random_batch(cfg, 3, 9, 5)
            model.eval()
            params = model.named_tensors()
            loss, _ = model(batch)
            loss.backward()
            gen = torch.Generator().manual_seed(6)
            direction = {n: torch.randn(p.shape, generator=gen, dtype=p.dtype)
                         for n, p in params.items()}
            terms = [p.grad * direction[n] for n, p in params.items()]
            analytic = sum(float(term.sum()) for term in terms)
            magnitude = sum(float(term.abs().sum()) for term in terms)
            h, values = 1e-5, []
            for sign in (1, -1):
                with torch.no_grad():
                    for n, p in params.items():
                        p.add_(sign * h * direction[n])
                    values.append(float(model(batch)[0]))
                    for n, p in params.items():
                        p.sub_(sign * h * direction[n])
            numeric = (values[0] - values[1]) / (2 * h)
            rel_err = abs(numeric - analytic) / magnitude  # magnitude: sum |g_i u_i|
            t.check(rel_err < 1e-7, f"{rel} {norm} residual={residual}: directional derivative "
                    f"autograd {analytic:.8g} vs finite difference {numeric:.8g} "
                    f"(err {rel_err:.1e} of sum|g u|)")


def row_losses(model, batch):
    """Sum of the CE terms of each row."""
    _, logits = model(batch)
    labels = batch["labels"].reshape(-1)
    rows = torch.nonzero(labels != IGNORE_LABEL).view(-1) // batch["labels"].shape[1]
    terms = -torch.log_softmax(logits, -1)[torch.arange(len(rows)), labels[labels != -100]]
    return [float(terms[rows == b].sum()) for b in range(batch["labels"].shape[0])]


def check_padding(t):
    for rel, absolute in (("none", "yes"), ("method4", "no"), ("method1", "yes")):
        cfg, model = random_model(make_config(rel=rel, absolute=absolute, residual="yes"), 7)
        model.eval()
        batch = random_batch(cfg, 4, 10, 8)
        padded = row_losses(model, batch)
        worst = 0.0
        for b in range(4):
            real = int(batch["attention_mask"][b].sum())
            alone = {key: v[b:b + 1, :real] for key, v in batch.items()}
            if (alone["labels"] != IGNORE_LABEL).any():
                worst = max(worst, abs(row_losses(model, alone)[0] - padded[b]))
        t.check(worst < 1e-10 and int(batch["attention_mask"].sum()) < 40,
                f"{rel}: padded rows = unpadded rows alone (err {worst:.1e})")


def check_per_sequence(t):
    """forward_per_sequence (each row alone, no mask) = forward (padded, key mask) in float64."""
    for rel in REL_MODES:
        text = make_config(rel=rel, absolute="yes" if rel == "none" else "no", residual="yes",
                           norm="pre" if rel in ("shaw", "t5", "rope") else "post")
        cfg, model = random_model(text, 11)
        model.eval()
        batch = random_batch(cfg, 4, 10, 12)
        results = []
        for run in (model, model.forward_per_sequence):
            model.zero_grad(set_to_none=True)
            loss, logits = run(batch)
            loss.backward()
            results.append([loss.detach(), logits.detach()] +
                           [p.grad.clone() for p in model.named_tensors().values()])
        err = max(float((a - b).abs().max()) for a, b in zip(*results))
        t.check(err < 1e-10, f"{rel}: per-sequence forward = padded forward, loss, logits and "
                f"gradients (err {err:.1e})")


def check_residual_one_layer(t):
    batch = None
    for mean in ("no", "yes"):
        outs = []
        for residual in ("no", "yes"):
            text = make_config(rel="method2", residual=residual, mean=mean).replace(
                "num_layers = 2", "num_layers = 1")
            cfg, model = random_model(text, 9)
            model.eval()
            batch = batch or random_batch(cfg, 2, 6, 10)
            outs.append(model(batch)[1])
        err = float((outs[0] - outs[1]).abs().max())
        t.check(err == 0.0, f"one layer: residual (mean={mean}) = plain attention")


def check_adamw(t):
    cfg, model = random_model(make_config(), 11)
    model.eval()
    batch = random_batch(cfg, 2, 8, 12)
    params = model.named_tensors()
    reference = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
    groups = [{"params": [reference[n] for n in params if decays(n)],
               "weight_decay": cfg.weight_decay},
              {"params": [reference[n] for n in params if not decays(n)],
               "weight_decay": 0.0}]
    torch_adamw = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                    eps=cfg.eps)
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}
    for step in range(1, 4):
        model.zero_grad()
        model(batch)[0].backward()
        grads = {n: p.grad for n, p in params.items()}
        for n in params:
            reference[n].grad = grads[n].clone()
        torch_adamw.step()
        adamw_step(params, grads, m, v, step, cfg)
    err = max(float((params[n] - reference[n]).abs().max()) for n in params)
    t.check(err < 1e-14, f"AdamW step = torch.optim.AdamW after 3 steps (err {err:.1e})")


def check_pipeline(t, tmp):
    worst = {}
    for rel in REL_MODES:
        for norm, residual, k in (("post", "yes", 3), ("pre", "no", 20)):
            text = make_config(rel=rel, norm=norm, residual=residual, k=k)
            ckpt, batch = os.path.join(tmp, "c.h5"), os.path.join(tmp, "b.h5")
            write_checkpoint(ckpt, text, 13)
            assert ref.run_command(["make-batch", "--config", ckpt, "--batch-size", "3",
                                    "--seq-len", "12", "--seed", "1", "--out", batch,
                                    "--pad"]) == 0
            for dtype in ("float32", "float64"):
                assert ref.run_command(["dump", "--checkpoint", ckpt, "--batch", batch, "--out",
                                        os.path.join(tmp, dtype + ".h5"), "--dtype", dtype]) == 0
            with h5py.File(os.path.join(tmp, "float32.h5")) as fa, \
                    h5py.File(os.path.join(tmp, "float64.h5")) as fb:
                checks = compare.compare_dump(fa, fb)
            failed = [line for ok, line in checks if not ok]
            errors = [float(line.split("rel_err=")[1].split()[0]) for _, line in checks]
            worst[(rel, norm)] = max(errors[1:])
            t.check(not failed, f"{rel} {norm} residual={residual} k={k}: float32 = float64 "
                    f"dump (worst tensor rel err {max(errors[1:]):.1e}, loss {errors[0]:.1e})"
                    + "".join("; " + line for line in failed))
    text = make_config(rel="method4")
    ckpt = os.path.join(tmp, "c.h5")
    write_checkpoint(ckpt, text, 14)
    ref.run_command(["make-batch", "--config", ckpt, "--batch-size", "3", "--seq-len", "10",
                     "--seed", "2", "--out", os.path.join(tmp, "b.h5")])
    ref.run_command(["dump", "--checkpoint", ckpt, "--batch", os.path.join(tmp, "b.h5"),
                     "--out", os.path.join(tmp, "m4.h5")])
    original = SelfAttention.scores

    def shaw_scores(self, q, k):  # method4 without the k.a_r term
        self.cfg.relative_position = "shaw"
        try:
            return original(self, q, k)
        finally:
            self.cfg.relative_position = "method4"
    SelfAttention.scores = shaw_scores
    try:
        ref.run_command(["dump", "--checkpoint", ckpt, "--batch", os.path.join(tmp, "b.h5"),
                         "--out", os.path.join(tmp, "wrong.h5")])
    finally:
        SelfAttention.scores = original
    with h5py.File(os.path.join(tmp, "wrong.h5")) as fa, \
            h5py.File(os.path.join(tmp, "m4.h5")) as fb:
        failed = [line for ok, line in compare.compare_dump(fa, fb) if not ok]
    t.check(len(failed) > 3, f"compare detects method4 computed as shaw ({len(failed)} FAILs)")


def check_rejects_bad_checkpoint(t, tmp):
    ckpt = os.path.join(tmp, "bad.h5")
    write_checkpoint(ckpt, make_config(rel="method1"), 15)
    with h5py.File(ckpt, "r+") as f:
        name = "model/bert/encoder/layer/1/attention/self/distance_embedding/weight"
        data = f[name][()]
        del f[name]
        f[name] = np.concatenate([data, data])
    message = io.StringIO()
    with contextlib.redirect_stderr(message):
        status = ref.run_command(["dump", "--checkpoint", ckpt, "--batch", ckpt, "--out",
                                  os.path.join(tmp, "never.h5")])
    t.check(status == 1 and "has shape (8, 1), expected (4, 1)" in message.getvalue(),
            "a checkpoint with a wrong table shape is rejected: " + message.getvalue().strip())


def main():
    t = Tally()
    torch.manual_seed(0)
    check_scores(t)
    check_finite_differences(t)
    check_padding(t)
    check_per_sequence(t)
    check_residual_one_layer(t)
    check_adamw(t)
    with tempfile.TemporaryDirectory() as tmp:
        check_pipeline(t, tmp)
        check_rejects_bad_checkpoint(t, tmp)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
