#!/usr/bin/python3
"""Checks of scripts/analyze_attention.py and `realpos attention` (run by tests/train/cli/test_analysis.sh).

1. Statistics on hand-made attention maps, against values worked out by hand: uniform rows have
   entropy ln n (normalised 1) and top-10% share ceil(0.1 n)/n, one-hot rows entropy 0 and share
   1, JS(uniform_n, one-hot) = (ln(2n/(n+1)) + ln(2/(n+1))/n + (n-1)/n ln 2) / 2, a previous-token
   head puts (n-1)/n of its mass at distance +1; padding rows and keys are ignored.
2. `realpos attention` against the independent PyTorch reference (tests/reference/reference.py) on
   freshly initialised checkpoints: every layer's probabilities and carried scores, with padding,
   in each --padding layout (longest, max_length, none: unpadded, exact zeros outside each
   sentence's block).
usage: test_analysis.py WORK_DIR REALPOS"""
import csv
import math
import os
import subprocess
import sys

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path[:0] = [os.path.join(ROOT, "scripts"), os.path.join(ROOT, "tests", "reference")]
import analyze_attention as aa  # noqa: E402

work, realpos = sys.argv[1], sys.argv[2]
failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"{'PASS' if ok else 'FAIL'} {name}{'' if ok else ': ' + detail}")
    failures += not ok


def close(a, b, tol=1e-6):
    return abs(a - b) <= tol


# ---- 1. hand-made maps --------------------------------------------------------------------------
LENGTHS, L = [4, 10], 10


def hand_made_maps():
    """2 layers x 2 heads, sentences of 4 and 10 tokens padded to 10. Padding query rows hold
    uniform rows over all L keys, so any use of them would change the statistics.
    layer 0: head 0 uniform, head 1 one-hot on key 0; layer 1: head 0 previous token (row 0 on
    itself), head 1 uniform."""
    probs = np.zeros((2, len(LENGTHS), 2, L, L))
    for b, n in enumerate(LENGTHS):
        probs[:, b, :, n:, :] = 1.0 / L  # padding rows
        for i in range(n):
            probs[0, b, 0, i, :n] = 1.0 / n
            probs[0, b, 1, i, 0] = 1.0
            probs[1, b, 0, i, max(i - 1, 0)] = 1.0
            probs[1, b, 1, i, :n] = 1.0 / n
    return probs


def write_attn(path, probs, table=None):
    with h5py.File(path, "w") as f:
        f["lengths"] = np.array(LENGTHS, dtype=np.int32)
        f["tokens"] = "\n".join(" ".join(f"t{j}" for j in range(n)) for n in LENGTHS) + "\n"
        for l in range(probs.shape[0]):
            f[f"layer_{l}/probs"] = probs[l].astype(np.float32)
            if table is not None:
                f[f"distance_embedding/layer_{l}"] = table
        f.attrs.update({"num_layers": probs.shape[0], "num_heads": probs.shape[2], "relative_k": 2,
                        "relative_position": "method4" if table is not None else "none"})


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def js_uniform_onehot(n):  # by hand: m = (u + e_0)/2, m_0 = (1 + 1/n)/2, m_j = 1/(2n)
    return 0.5 * (math.log(2 * n / (n + 1)) + math.log(2 / (n + 1)) / n + (n - 1) / n * math.log(2))


table = np.zeros((5, 3), dtype=np.float32)  # method4, k = 2: row r <-> i - j = r - 2, |row| = r
table[:, 1] = np.arange(5)
probs = hand_made_maps()
write_attn(os.path.join(work, "hand.h5"), probs, table)
write_attn(os.path.join(work, "hand_swapped.h5"), probs[::-1].copy())
out = os.path.join(work, "analysis")
run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "analyze_attention.py"),
                      os.path.join(work, "hand.h5"), os.path.join(work, "hand_swapped.h5"), "--labels", "a,b",
                      "--out", out], capture_output=True, text=True)
check("analyze_attention.py runs on two inputs", run.returncode == 0, run.stderr[-500:])

stats = {(r["model"], int(r["layer"]), int(r["head"])): r for r in read_csv(os.path.join(out, "attention_stats.csv"))}
rows = sum(LENGTHS)
uniform_h = sum(n * math.log(n) for n in LENGTHS) / rows
uniform_top = sum(n * math.ceil(0.1 * n) / n for n in LENGTHS) / rows  # (4 * 1/4 + 10 * 1/10) / 14
u, one = stats[("a", 0, 0)], stats[("a", 0, 1)]
check("uniform attention: entropy = mean ln(length), the maximum",
      close(float(u["entropy"]), uniform_h, 1e-5) and close(float(u["entropy_max"]), uniform_h, 1e-5),
      f"{u['entropy']} vs {uniform_h}")
check("uniform attention: normalised entropy 1", close(float(u["entropy_normalized"]), 1.0, 1e-5), u["entropy_normalized"])
check("uniform attention: top-10% share = ceil(0.1 n)/n", close(float(u["top10_share"]), uniform_top, 1e-5),
      f"{u['top10_share']} vs {uniform_top}")
check("one-hot attention: entropy 0 and top-10% share 1",
      close(float(one["entropy"]), 0.0) and close(float(one["top10_share"]), 1.0), str(one))
check("a second input is analysed side by side (layers swapped)",
      close(float(stats[("b", 1, 0)]["entropy"]), uniform_h, 1e-5) and close(float(stats[("b", 0, 0)]["entropy"]), 0))

js = {(r["model"], int(r["head"])): float(r["js"]) for r in read_csv(os.path.join(out, "js_adjacent.csv"))}
expected_js = sum(n * js_uniform_onehot(n) for n in LENGTHS) / rows
check("JS(uniform over 4, one-hot) = 0.3804 nats by hand", close(js_uniform_onehot(4), 0.380396, 1e-6) and
      close(aa.js_divergence(np.full(4, 0.25), np.eye(4)[0]), 0.380396, 1e-6), str(js_uniform_onehot(4)))
check("JS of adjacent layers, uniform vs previous-token head", close(js[("a", 0)], expected_js, 1e-5),
      f"{js[('a', 0)]} vs {expected_js}")
check("JS of adjacent layers, one-hot vs uniform head", close(js[("a", 1)], expected_js, 1e-5),
      f"{js[('a', 1)]} vs {expected_js}")
check("JS: 0 for equal rows, ln 2 for disjoint ones",
      close(aa.js_divergence(np.eye(3)[1], np.eye(3)[1]), 0) and
      close(aa.js_divergence(np.eye(3)[0], np.eye(3)[2]), math.log(2)))

mass = {int(r["distance"]): float(r["mass"]) for r in read_csv(os.path.join(out, "distance_mass.csv"))
        if r["model"] == "a" and r["layer"] == "1" and r["head"] == "0"}
check("previous-token head: mass (n-1)/n at distance +1, 1/n at 0, none elsewhere",
      close(mass[1], 12 / 14) and close(mass[0], 2 / 14) and close(sum(mass.values()), 1.0) and
      all(close(v, 0) for d, v in mass.items() if d not in (0, 1)), str(mass))
umass = {int(r["distance"]): float(r["mass"]) for r in read_csv(os.path.join(out, "distance_mass.csv"))
         if r["model"] == "a" and r["layer"] == "0" and r["head"] == "0"}
uniform_by_hand = {d: sum(max(n - abs(d), 0) / n for n in LENGTHS) / rows for d in umass}
check("uniform head: mass at distance d = sum over sentences of (n - |d|)/n / rows",
      all(close(umass[d], uniform_by_hand[d]) for d in umass), str(umass))
ubase = {int(r["distance"]): float(r["uniform_mass"]) for r in read_csv(os.path.join(out, "distance_mass.csv"))
         if r["model"] == "a" and r["layer"] == "1" and r["head"] == "0"}
check("uniform_mass is the uniform head's mass, whatever the head",
      sorted(ubase) == sorted(uniform_by_hand) and all(close(ubase[d], uniform_by_hand[d]) for d in ubase), str(ubase))
norms = [(int(r["distance"]), float(r["norm"])) for r in read_csv(os.path.join(out, "distance_embedding_norm.csv"))
         if r["layer"] == "0"]
check("distance-embedding norms by distance (row r <-> i - j = r - k)",
      norms == [(-2, 0.0), (-1, 1.0), (0, 2.0), (1, 3.0), (2, 4.0)] and
      all(r["model"] == "a" for r in read_csv(os.path.join(out, "distance_embedding_norm.csv"))), str(norms))
figures = ["attention_maps.png", "entropy_sparsity.png", "js_divergence.png", "distance_mass.png",
           "distance_embedding_norm.png"]
check("figures are written", all(os.path.getsize(os.path.join(out, f)) > 1000 for f in figures))

# ---- 2. realpos attention against the PyTorch reference ---------------------------------------------
import torch  # noqa: E402

import reference_io  # noqa: E402; tests/reference/reference_io.py: the reference's checkpoint loader

vocab = os.path.join(work, "vocab.txt")
with open(vocab, "w") as f:
    f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n" + "".join(f"w{i}\n" for i in range(95)))
sentences = os.path.join(work, "sentences.txt")
with open(sentences, "w") as f:
    f.write("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14\n\nw7 w7 w90 w3\nw50 w51 w52 w53 w54 w55 w56 w57 w58\n")
LEN_EXPECTED = [12, 6, 11]  # [CLS] + tokens + [SEP], the first cut to --max-len 12


def reference_maps(ckpt, ids, mask):
    """Per layer (probs, carried or None) from the reference model, float64."""
    cfg, model = reference_io.load_model(ckpt, torch.float64)
    model.eval()
    captured = []

    def hook(attn, inputs, output):
        x, mask_add, _, bias = inputs
        q, k = (attn.split_heads(lin(x)) for lin in (attn.query, attn.key))
        carried = output[1]
        if carried is None:
            logits = attn.scores(q, k) + (0 if bias is None else bias)
        else:
            logits = carried / attn.layer_number if cfg.residual_attention_mean else carried
        captured.append((torch.softmax(logits + mask_add[:, None, None, :], dim=-1), carried))
    for layer in model.bert.encoder.layer:
        layer.attention.self.register_forward_hook(hook)
    with torch.no_grad():
        x = model.bert.embeddings(ids, torch.zeros_like(ids))
        model.bert.encoder(x, mask)
    with torch.no_grad():
        bias = model.bert.encoder.position_bias(ids.shape[1], torch.float64)
    return [(p.numpy(), None if c is None else c.numpy()) for p, c in captured], bias


CASES = [("method4 k=3, residual", ["model.relative_position=method4", "model.relative_k=3",
                                     "model.absolute_position=no", "model.residual_attention=yes"]),
         ("shaw k=5, pre-norm", ["model.relative_position=shaw", "model.relative_k=5", "model.norm=pre"]),
         ("absolute, residual mean", ["model.residual_attention=yes", "model.residual_attention_mean=yes"]),
         ("t5 8 buckets, residual", ["model.relative_position=t5", "model.t5_num_buckets=8", "model.t5_max_distance=5",
                                     "model.absolute_position=no", "model.residual_attention=yes"]),
         ("alibi", ["model.relative_position=alibi", "model.absolute_position=no"]),
         ("rope, pre-norm", ["model.relative_position=rope", "model.absolute_position=no", "model.norm=pre"])]
PADDINGS = ("longest", "max_length", "none")  # attention --padding: every layout
for (case, sets), padding in ((case, padding) for case in CASES for padding in PADDINGS):
    name = f"{case} [{padding}]"
    ckpt, attn = os.path.join(work, "init.h5"), os.path.join(work, "attn.h5")
    init = [realpos, "init", os.path.join(ROOT, "configs", "tiny.ini"), "--out", ckpt,
            "--set", "model.init_range=0.3", "--set", "model.num_layers=3"]
    subprocess.run(init + [a for s in sets for a in ("--set", s)], check=True, capture_output=True)
    r = subprocess.run([realpos, "attention", ckpt, "--input", sentences, "--out", attn, "--vocab", vocab,
                        "--max-len", "12", "--padding", padding], capture_output=True, text=True)
    if r.returncode != 0:
        check(f"{name}: realpos attention runs", False, r.stderr[-500:])
        continue
    if padding == "none":  # unpadded: nothing outside each sentence's [lengths[b], lengths[b]] block
        with h5py.File(attn, "r") as f:
            n, maps = f["lengths"][()], [f[k][()] for k in f if k.startswith("layer_")
                                         for k in (k + "/probs", k + "/carried") if k in f]
        L = maps[0].shape[-1]
        block = (np.arange(L)[None, :, None] < n[:, None, None]) & (np.arange(L)[None, None, :] < n[:, None, None])
        outside = max(np.abs(m[~np.broadcast_to(block[:, None], m.shape)]).max() for m in maps)
        check(f"{name}: maps exactly 0 outside each sentence's block", outside == 0.0, str(outside))
    with h5py.File(attn, "r") as f:
        lengths = f["lengths"][()]
        ids = f["input_ids"][()]
        tokens = f["tokens"][()].decode().splitlines()
        ours = [(f[f"layer_{l}/probs"][()], f[f"layer_{l}/carried"][()] if f"layer_{l}/carried" in f else None)
                for l in range(3)]
        position_bias = f["position_bias"][()] if "position_bias" in f else None
    check(f"{name}: blank lines skipped, [CLS] ... [SEP], cut at --max-len",
          list(lengths) == LEN_EXPECTED and all(ids[b, 0] == 2 and ids[b, n - 1] == 3 for b, n in enumerate(lengths))
          and tokens[1] == "[CLS] w7 w7 w90 w3 [SEP]", f"{list(lengths)} {tokens}")
    mask = torch.tensor((np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64))
    ref, ref_bias = reference_maps(ckpt, torch.tensor(ids, dtype=torch.int64), mask)
    if ref_bias is None:
        check(f"{name}: no /position_bias for a mode without a bias", position_bias is None)
    else:  # ours[h, j - i + L - 1] = the reference's bias[h, i, j]
        L = ids.shape[1]
        i, j = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
        berr = np.abs(position_bias[:, j - i + L - 1] - ref_bias.numpy()).max()
        check(f"{name}: /position_bias per head and distance = the reference's bias (max error {berr:.1e})",
              berr < 1e-6 and np.abs(ref_bias.numpy()).max() > 1e-3, str(berr))
        out_dir = os.path.join(work, "bias-" + name.split()[0])
        a = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "analyze_attention.py"), attn, "--out",
                            out_dir], capture_output=True, text=True)
        recs = read_csv(os.path.join(out_dir, "position_bias.csv")) if a.returncode == 0 else []
        want = {(h, i - j): ref_bias[h, i, j].item() for h in range(ref_bias.shape[0]) for i in range(L) for j in range(L)}
        cerr = max((abs(float(r["bias"]) - want[(int(r["head"]), int(r["distance"]))]) for r in recs), default=1.0)
        check(f"{name}: analyze_attention.py position_bias.csv by head and distance i - j (max error {cerr:.1e}) "
              "and position_bias.png", len(recs) == ref_bias.shape[0] * (2 * L - 1)
              and cerr < 1e-5 and os.path.exists(os.path.join(out_dir, "position_bias.png")), a.stderr[-300:])
    real = np.arange(ids.shape[1])[None, :] < lengths[:, None]  # [B, L] real positions
    rows = real[:, None, :, None] & np.ones_like(ours[0][0], dtype=bool)  # real query rows
    err = max(np.abs(o[0] - r[0])[rows].max() for o, r in zip(ours, ref))
    spread = min(o[0][rows].max() for o in ours)
    check(f"{name}: probabilities of every layer match the reference (max error {err:.1e})",
          err < 1e-5 and spread > 0.3, f"error {err}, largest probability {spread}")
    if "model.residual_attention=yes" in sets:
        cerr = max(np.abs(o[1] - r[1])[rows & real[:, None, None, :]].max() /
                   np.abs(r[1]).max() for o, r in zip(ours, ref))
        check(f"{name}: carried scores of every layer match the reference (relative error {cerr:.1e})",
              cerr < 1e-5, str(cerr))
    else:
        check(f"{name}: no carried scores without residual attention", all(o[1] is None for o in ours))

r = subprocess.run([realpos, "attention", os.path.join(work, "init.h5"), "--input", sentences, "--out",
                    os.path.join(work, "x.h5")], capture_output=True, text=True)
check("realpos attention: a checkpoint without /vocab needs --vocab",
      r.returncode != 0 and "pass --vocab" in r.stderr, r.stderr)
sys.exit(1 if failures else 0)
