#!/usr/bin/python3
"""Independent reference for HuggingFace BERT folders (the proof of `realpos import-hf/export-hf`).

Written from HuggingFace's BertForMaskedLM semantics and names (modeling_bert.py), not from the C
sources or tests/reference/reference.py; transformers and safetensors are not needed (safetensors is read
and written with numpy in hf_safetensors.py). float64 throughout.

  make-folder OUT [options]   a random HF model folder: config.json, model.safetensors (or shards
                              + model.safetensors.index.json), vocab.txt, tokenizer_config.json
  make-batch FOLDER --out B   a random padded MLM batch file (realpos's batch format)
  logits FOLDER --batch B --out OUT   loss and MLM logits of the labelled positions (HF semantics)
  jobs FILE                   run one of the above per line, in one process
  perturb CKPT.h5             noise on every /model dataset of a realpos checkpoint (in place)
  top-k FOLDER --ids I,J,.. --k K --out F   fill-mask's expected output for one sequence
  token-tags FOLDER --input F --out OUT   BertForTokenClassification's label and probability per
                              word of a tagging file whose words are whole vocabulary tokens,
                              the folder loaded strictly (its tensors are exactly the module's)
  same-tensors A B            every tensor of folder A that realpos keeps is in B, bit-identical
                              as float32 (A may use BertModel names, gamma/beta, F16/BF16)
"""
import argparse
import json
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import h5seal  # noqa: E402; scripts/h5seal.py: the checksum realpos verifies on every HDF5 file it reads
import torch

from hf_model import BertForMaskedLM, BertForTokenClassification, load_mlm
from hf_safetensors import read_folder, write_safetensors

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def cmd_token_tags(a):
    config, tensors = read_folder(a.folder)
    assert config["architectures"] == ["BertForTokenClassification"], config["architectures"]
    model = BertForTokenClassification(config).double()
    own = model.state_dict()
    if config.get("position_embedding_type", "absolute") != "absolute":
        own.pop("bert.embeddings.position_embeddings.weight")  # HF keeps it, unused
        tensors.pop("bert.embeddings.position_embeddings.weight", None)
    missing, unexpected = sorted(set(own) - set(tensors)), sorted(set(tensors) - set(own))
    assert not missing and not unexpected, f"module layout: missing {missing}, unexpected {unexpected}"
    model.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float64).copy())
                           for k, v in tensors.items()}, strict=False)
    model.eval()
    with open(os.path.join(a.folder, "vocab.txt")) as f:
        vocab = {w: i for i, w in enumerate(f.read().splitlines())}
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    examples, words = [], []
    with open(a.input) as f:
        for line in f.read().splitlines() + [""]:
            if line.split():
                words.append(line.split()[0])
            elif words:
                examples.append(words)
                words = []
    with open(a.out, "w") as out:
        for words in examples:
            ids = torch.tensor([[vocab["[CLS]"]] + [vocab[w.lower()] for w in words] + [vocab["[SEP]"]]])
            with torch.no_grad():
                probs = torch.softmax(model(ids, torch.zeros_like(ids), torch.ones_like(ids))[0], -1)
            for i, w in enumerate(words):
                best = int(torch.argmax(probs[i + 1]))
                out.write(f"{w}\t{labels[best]}\t{float(probs[i + 1, best]):.6f}\n")
            out.write("\n")
    return 0


# ---- make-folder ---------------------------------------------------------------------------

ARCHS = {"mlm": "BertForMaskedLM", "pretraining": "BertForPreTraining", "base": "BertModel",
         "seqcls": "BertForSequenceClassification", "qa": "BertForQuestionAnswering"}


def random_state(c, arch, rng, scale):
    """HF state_dict (numpy float64) of a randomly initialised model of that architecture."""
    torch.manual_seed(int(rng.integers(1 << 31)))
    model = BertForMaskedLM(c, pooler=arch in ("pretraining", "base", "seqcls")).double()
    state = {}
    for name, p in model.state_dict().items():
        value = rng.standard_normal(tuple(p.shape)) * scale
        if name.endswith("LayerNorm.weight"):
            value += 1.0
        state[name] = value
    if arch in ("base", "seqcls", "qa"):
        state = {n: v for n, v in state.items() if not n.startswith("cls.")}
    if arch == "qa":
        state = {n: v for n, v in state.items() if not n.startswith("bert.pooler.")}
    H = c["hidden_size"]
    if arch == "pretraining":
        state["cls.seq_relationship.weight"] = rng.standard_normal((2, H)) * scale
        state["cls.seq_relationship.bias"] = rng.standard_normal(2) * scale
    if arch == "seqcls":
        n = c.get("num_labels_", 3)
        state["classifier.weight"] = rng.standard_normal((n, H)) * scale
        state["classifier.bias"] = rng.standard_normal(n) * scale
    if arch == "qa":
        state["qa_outputs.weight"] = rng.standard_normal((2, H)) * scale
        state["qa_outputs.bias"] = rng.standard_normal(2) * scale
    return state


def cmd_make_folder(a):
    rng = np.random.default_rng(a.seed)
    words = SPECIAL + [f"w{i}" for i in range(a.vocab - len(SPECIAL))]
    if a.vocab_file:
        with open(a.vocab_file) as f:
            words = [w.strip() for w in f]
        a.vocab = len(words)
    c = {"architectures": [ARCHS[a.arch]], "model_type": "bert", "hidden_size": a.hidden,
         "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
         "intermediate_size": a.intermediate, "vocab_size": a.vocab,
         "max_position_embeddings": a.max_position, "type_vocab_size": 2,
         "layer_norm_eps": a.eps, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
         "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
         "position_embedding_type": a.position, "pad_token_id": 0}
    if a.arch == "seqcls":
        c["id2label"] = {str(i): f"class_{i}" for i in range(3)}
        c["label2id"] = {f"class_{i}": i for i in range(3)}
        c["num_labels_"] = 3
    state = random_state(c, a.arch, rng, a.scale)
    c.pop("num_labels_", None)
    names = {}
    for name in state:
        new = name
        if a.arch == "base":
            new = new[len("bert."):]
        if a.gamma_beta:
            new = new.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                               "LayerNorm.beta")
        names[name] = new
    tensors = {names[n]: v for n, v in state.items()}
    prefix = "" if a.arch == "base" else "bert."
    if a.position_ids:
        tensors[prefix + "embeddings.position_ids"] = np.arange(a.max_position)[None]
    if a.decoder_stored and a.arch in ("mlm", "pretraining"):
        tensors["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
        tensors["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if a.shards > 1:
        items = list(tensors.items())
        weight_map = {}
        for s in range(a.shards):
            file = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            part = dict(items[s::a.shards])
            write_safetensors(os.path.join(a.out, file), part, a.dtype)
            weight_map.update({n: file for n in part})
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    else:
        write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, a.dtype)
    with open(os.path.join(a.out, "vocab.txt"), "w") as f:
        f.write("".join(w + "\n" for w in words))
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": not a.cased, "tokenizer_class": "BertTokenizer"}, f)
    return 0


# ---- make-batch, logits ----------------------------------------------------------------------

def cmd_make_batch(a):
    config, _ = read_folder(a.folder)
    rng = np.random.default_rng(a.seed)
    B, L, V = a.batch_size, a.seq_len, config["vocab_size"]
    ids = rng.integers(0, V, (B, L))
    types = rng.integers(0, 2, (B, L))
    mask = np.ones((B, L), dtype=np.int64)
    for b in range(1, B):  # row 1 padded
        real = int(rng.integers(max(1, L // 3), L))
        mask[b, real:] = 0
        ids[b, real:], types[b, real:] = 0, 0
    chosen = (rng.random((B, L)) < 0.3) & (mask == 1)
    chosen[0, 0] = True
    labels = np.where(chosen, rng.integers(0, V, (B, L)), -100)
    with h5seal.create(a.out) as f:
        for key, value in (("input_ids", ids), ("token_type_ids", types),
                           ("attention_mask", mask), ("labels", labels)):
            f[key] = value.astype(np.int32)
    h5seal.seal(a.out)
    return 0


def cmd_logits(a):
    _, model = load_mlm(a.folder)
    with h5py.File(a.batch, "r") as f:
        ids, types, mask, labels = (torch.from_numpy(f[k][()].astype(np.int64)) for k in
                                    ("input_ids", "token_type_ids", "attention_mask", "labels"))
    with torch.no_grad():
        logits = model(ids, types, mask)
    chosen = labels != -100
    picked = logits[chosen]  # row-major (b, l) order
    loss = torch.nn.functional.cross_entropy(picked, labels[chosen])
    with h5py.File(a.out, "w") as f:
        f["loss"] = float(loss)
        f["logits"] = picked.numpy()
    return 0


def cmd_perturb(a):
    """Add scale * N(0, 1) to every /model dataset of a realpos checkpoint, in place (so that
    biases and LayerNorms are not at their trivial initial values)."""
    rng = np.random.default_rng(a.seed)
    with h5py.File(a.checkpoint, "r+") as f:
        names = []
        f["model"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in sorted(names):
            d = f["model/" + name]
            d[...] = (d[()] + a.scale * rng.standard_normal(d.shape)).astype(d.dtype)
    h5seal.seal(a.checkpoint)
    return 0


def cmd_top_k(a):
    """Top-k tokens and probabilities at every [MASK] of one sequence of ids (fill-mask)."""
    _, model = load_mlm(a.folder)
    with open(os.path.join(a.folder, "vocab.txt")) as f:
        words = [w.strip() for w in f]
    ids = torch.tensor([[int(t) for t in a.ids.split(",")]])
    with torch.no_grad():
        probs = torch.softmax(model(ids, torch.zeros_like(ids), torch.ones_like(ids))[0], -1)
    with open(a.out, "w") as f:
        for pos in (ids[0] == words.index("[MASK]")).nonzero()[:, 0].tolist():
            top = torch.argsort(-probs[pos])[: a.k].tolist()
            f.write("".join(f"{r + 1} {words[t]} {float(probs[pos, t]):.6f}\n" for r, t in enumerate(top)))
    return 0


# ---- same-tensors --------------------------------------------------------------------------

def normalized(name, prefix):
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                       "LayerNorm.bias")
    return prefix + name if prefix and name.split(".")[0] in ("embeddings", "encoder",
                                                              "pooler") else name


def cmd_same_tensors(a):
    ca, ta = read_folder(a.a)
    _, tb = read_folder(a.b)
    relative = ca.get("position_embedding_type", "absolute") != "absolute"
    base = not any(n.startswith(("bert.", "cls.", "classifier.", "qa_outputs.")) for n in ta)
    prefix = "" if base else "bert."
    tb = {normalized(n, prefix): v for n, v in tb.items()}
    checked, bad = 0, []
    for name, value in ta.items():
        key = normalized(name, prefix)
        dropped = key.endswith("position_ids") or key.startswith(("cls.seq_relationship.",
                                                                  "cls.predictions.decoder.")) \
            or (relative and key.endswith("embeddings.position_embeddings.weight"))
        if dropped:
            continue
        if key not in tb:
            bad.append(f"{name}: missing in {a.b}")
            continue
        x, y = np.asarray(value, dtype=np.float32), np.asarray(tb[key], dtype=np.float32)
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            bad.append(f"{name}: differs")
        checked += 1
    for line in bad:
        print("FAIL " + line)
    print(f"{'FAIL' if bad else 'OK'} {checked} tensors compared")
    return 1 if bad or not checked else 0


def cmd_jobs(a):
    """Run one command line per line of a file in this process (torch is imported once)."""
    import shlex
    status = 0
    with open(a.file) as f:
        for line in f:
            if line.strip():
                rc = main(shlex.split(line))
                if rc:
                    print(f"FAIL job: {line.strip()} (status {rc})")
                status |= rc
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make-folder")
    p.add_argument("out")
    p.add_argument("--arch", choices=sorted(ARCHS), default="mlm")
    p.add_argument("--position", default="absolute",
                   choices=("absolute", "relative_key", "relative_key_query"))
    p.add_argument("--dtype", choices=("F32", "F16", "BF16"), default="F32")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--gamma-beta", action="store_true")
    p.add_argument("--position-ids", action="store_true")
    p.add_argument("--decoder-stored", action="store_true")
    p.add_argument("--cased", action="store_true")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=64)
    p.add_argument("--vocab", type=int, default=60)
    p.add_argument("--vocab-file", help="use this vocab.txt (vocab_size = its lines)")
    p.add_argument("--max-position", type=int, default=16)
    p.add_argument("--eps", type=float, default=1e-12)
    p.add_argument("--scale", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("make-batch")
    p.add_argument("folder")
    p.add_argument("--out", required=True)
    p.add_argument("--batch-size", type=int, default=3)
    p.add_argument("--seq-len", type=int, default=12)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("logits")
    p.add_argument("folder")
    p.add_argument("--batch", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("token-tags")
    p.add_argument("folder")
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("same-tensors")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("perturb")
    p.add_argument("checkpoint")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scale", type=float, default=0.2)
    p = sub.add_parser("top-k")
    p.add_argument("folder")
    p.add_argument("--ids", required=True, help="comma-separated token ids")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--out", required=True)
    p = sub.add_parser("jobs")
    p.add_argument("file")
    a = parser.parse_args(argv)
    return {"make-folder": cmd_make_folder, "make-batch": cmd_make_batch, "logits": cmd_logits,
            "same-tensors": cmd_same_tensors, "token-tags": cmd_token_tags, "top-k": cmd_top_k, "perturb": cmd_perturb,
            "jobs": cmd_jobs}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
