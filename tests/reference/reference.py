#!/usr/bin/python3
"""Independent PyTorch reference for the realpos engine (the proof that the C code is right).

The model is written from the math in docs/checkpoint.md and layers/attention.h, never from the C
sources: the slow, obvious form (the relative terms materialise [L, L, d] tables), float64 by
default, gradients by autograd. Parameter names are HuggingFace BertForMaskedLM state_dict keys
with '.' -> '/'; they come from the module hierarchy below.

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
import configparser
import math
import os
import shlex
import shutil
import subprocess
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import compare  # tests/reference/compare.py (this script's directory is on sys.path)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import h5seal  # noqa: E402; scripts/h5seal.py: the checksum realpos verifies

REL_MODES = ("none", "shaw", "method1", "method2", "method3", "method4", "t5", "alibi", "rope")
IGNORE_LABEL = -100
MASK_VALUE = -10000.0
REALPOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "realpos")


# ---- configuration -------------------------------------------------------------------------

def _bool(text):
    if text not in ("yes", "no"):
        raise ValueError("expected yes|no")
    return text == "yes"


def _enum(*names):
    def parse(text):
        if text not in names:
            raise ValueError("expected " + "|".join(names))
        return text
    return parse


def _float32(text):
    """The engine stores float keys as float32 (beta2 = 0.999 is 0.99900001...); use the same."""
    return float(np.float32(float(text)))


MODEL_KEYS = dict(
    hidden_size=int, num_layers=int, num_heads=int, intermediate_size=int, vocab_size=int,
    max_position=int, type_vocab_size=int, absolute_position=_bool, norm=_enum("post", "pre"),
    hidden_dropout=_float32, attention_dropout=_float32, layer_norm_eps=_float32,
    init_range=_float32,
    relative_position=_enum(*REL_MODES), relative_k=int, t5_num_buckets=int, t5_max_distance=int,
    rope_theta=_float32, residual_attention=_bool,
    residual_attention_mean=_bool)
OPTIM_KEYS = dict(lr=_float32, beta1=_float32, beta2=_float32, eps=_float32,
                  weight_decay=_float32, bias_correction=_bool)
SCHEDULES = ("linear", "cosine", "constant")
# [train] keys of a training step: optional here (a trajectory needs them, a gradient dump does not)
TRAIN_KEYS = dict(schedule=_enum(*SCHEDULES), warmup_steps=int, warmup_proportion=_float32,
                  clip_grad_norm=_float32)


class Config:
    """[model] and [optim] of an INI text, typed; every key must be present."""

    def __init__(self, text, origin):
        ini = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"))
        ini.read_string(text, source=origin)
        for section, keys in (("model", MODEL_KEYS), ("optim", OPTIM_KEYS)):
            for key, parse in keys.items():
                if not ini.has_option(section, key):
                    sys.exit(f"{origin}: missing key '{section}.{key}' (give a full effective "
                             "config, e.g. a checkpoint)")
                raw = ini.get(section, key).strip()
                try:
                    setattr(self, key, parse(raw))
                except ValueError as err:
                    sys.exit(f"{origin}: key '{section}.{key}': {err}, got '{raw}'")
        for key, parse in TRAIN_KEYS.items():
            raw = ini.get("train", key).strip() if ini.has_option("train", key) else None
            try:
                setattr(self, key, None if raw is None else parse(raw))
            except ValueError as err:
                sys.exit(f"{origin}: key 'train.{key}': {err}, got '{raw}'")
        self.origin = origin
        self.head_dim = self.hidden_size // self.num_heads


def apply_overrides(text, overrides):
    """INI text with 'section.key=value' assignments applied."""
    ini = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"))
    ini.read_string(text)
    for assignment in overrides:
        name, _, value = assignment.partition("=")
        section, _, key = name.partition(".")
        if not key or not _:
            sys.exit(f"--set {assignment}: expected section.key=value")
        if not ini.has_section(section):
            ini.add_section(section)
        ini.set(section, key, value)
    return "\n".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in ini.items(s))
                     for s in ini.sections())


def load_config(path, overrides=()):
    """Effective config of a checkpoint (its stored text) or an INI file (through `realpos
    config` when the binary exists, so that defaults come from the engine's schema)."""
    if h5py.is_hdf5(path):
        with h5py.File(path, "r") as f:
            text = _attr_str(f.attrs, "config", path)
        return Config(apply_overrides(text, overrides), path)
    if os.path.exists(REALPOS):
        cmd = [REALPOS, "config", path] + [a for o in overrides for a in ("--set", o)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode == 0:
            return Config(run.stdout, path)
    with open(path) as f:
        return Config(apply_overrides(f.read(), overrides), path)


def _attr_str(attrs, name, path):
    if name not in attrs:
        sys.exit(f"{path}: missing root attribute '{name}'")
    value = attrs[name]
    return value.decode() if isinstance(value, bytes) else str(value)


def relative_table_shape(cfg):
    """(rows, cols) of a layer's distance_embedding, or None (none, t5, alibi, rope)."""
    k, d = cfg.relative_k, cfg.head_dim
    return {"shaw": (2 * k + 1, d), "method1": (k + 1, 1),
            "method2": (2 * k + 1, 1), "method3": (2 * k + 1, d),
            "method4": (2 * k + 1, d)}.get(cfg.relative_position)


def t5_buckets(L, num_buckets, max_distance):
    """[L, L] T5 bucket of j - i (HuggingFace modeling_t5.py _relative_position_bucket,
    bidirectional=True, as HF computes it: float32 log of a long tensor)."""
    rel = torch.arange(L).view(1, L) - torch.arange(L).view(L, 1)  # j - i
    half = num_buckets // 2
    exact = half // 2
    bucket = (rel > 0).long() * half
    n = rel.abs()
    large = exact + (torch.log(n.float() / exact) / math.log(max_distance / exact)
                     * (half - exact)).long()
    large = torch.minimum(large, torch.full_like(large, half - 1))
    return bucket + torch.where(n < exact, n, large)


def alibi_slopes(n):
    """Press et al.'s get_slopes (ALiBi reference code)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    p = 2 ** math.floor(math.log2(n))
    return power_of_2(p) + alibi_slopes(2 * p)[0::2][: n - p]


def rope(x, theta):
    """x [B, heads, L, d] rotated by position (GPT-NeoX half split): pairs (t, t + d/2) by
    the angle p * theta^(-2t/d)."""
    L, d = x.shape[2], x.shape[3]
    inv = theta ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = torch.arange(L, dtype=torch.float64).view(L, 1) * inv.view(1, -1)  # [L, d/2]
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    lo, hi = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((lo * cos - hi * sin, hi * cos + lo * sin), dim=-1)


# ---- model ---------------------------------------------------------------------------------

def dropout(x, p, training):
    return F.dropout(x, p, training) if training and p > 0 else x


def gelu(x):
    """Exact GELU: x * Phi(x)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class Embeddings(nn.Module):
    """LN(word[ids] + type[types] + pos[0..L-1]) then dropout."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        if cfg.absolute_position:
            self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, ids, types):
        x = self.word_embeddings.weight[ids] + self.token_type_embeddings.weight[types]
        if self.cfg.absolute_position:
            x = x + self.position_embeddings.weight[: ids.shape[1]]  # [L, H] broadcast over B
        return dropout(self.LayerNorm(x), self.cfg.hidden_dropout, self.training)


class SelfAttention(nn.Module):
    """Scores S (six modes), residual carried scores C, mask, softmax, P.V (layers/attention.h)."""

    def __init__(self, cfg, layer_number):
        super().__init__()
        self.cfg, self.layer_number = cfg, layer_number  # layer_number is l in C_l (1-based)
        H = cfg.hidden_size
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        shape = relative_table_shape(cfg)
        if shape:
            self.distance_embedding = nn.Embedding(*shape)
        self.efficient = False  # bench only: gather instead of materialising (shaw, method4)

    def split_heads(self, x):  # [B, L, H] -> [B, heads, L, d]
        B, L, _ = x.shape
        return x.view(B, L, self.cfg.num_heads, self.cfg.head_dim).transpose(1, 2)

    def scores(self, q, k):
        """S [B, heads, L, L] = scale * (mode-dependent score), r = clip(i-j,-k,k)+k,
        s = min(|i-j|, k)."""
        mode, L, kt = self.cfg.relative_position, q.shape[2], self.cfg.relative_k
        if mode == "rope":
            q, k = rope(q, self.cfg.rope_theta), rope(k, self.cfg.rope_theta)
        i = torch.arange(L).view(L, 1)
        j = torch.arange(L).view(1, L)
        r = (i - j).clamp(-kt, kt) + kt  # [L, L]
        s = (i - j).abs().clamp(max=kt)  # [L, L]
        qk = torch.einsum("bhid,bhjd->bhij", q, k)
        if mode in ("none", "t5", "alibi", "rope"):  # t5, alibi: + position_bias in forward
            e = qk
        elif mode == "method1":
            e = qk * self.distance_embedding.weight[:, 0][s]
        elif mode == "method2":
            e = qk * self.distance_embedding.weight[:, 0][r]
        elif self.efficient and mode in ("shaw", "method4"):
            table = self.distance_embedding.weight  # [2k+1, d]
            q_a = torch.matmul(q, table.t())  # [B, h, L, 2k+1]: q_i . a_t for every row t
            e = qk + torch.gather(q_a, 3, r.expand(q_a.shape[:2] + (L, L)))
            if mode == "method4":
                k_a = torch.matmul(k, table.t())  # [B, h, L(j), 2k+1]
                e = e + torch.gather(k_a, 3, r.t().expand(k_a.shape[:2] + (L, L))).transpose(2, 3)
        else:
            a = self.distance_embedding.weight[r]  # [L, L, d]: a_{r(i,j)}
            if mode == "shaw":
                e = qk + torch.einsum("bhid,ijd->bhij", q, a)
            elif mode == "method3":
                e = torch.einsum("bhid,bhjd,ijd->bhij", q, k, a)
            else:  # method4
                e = qk + torch.einsum("bhid,ijd->bhij", q, a) + torch.einsum("bhjd,ijd->bhij", k, a)
        return e / math.sqrt(self.cfg.head_dim)

    def forward(self, x, mask_add, carried, position_bias):
        """x [B, L, H], mask_add [B, L] (0 or -10000 per key), carried C_{l-1} or None,
        position_bias [heads, L, L] added to the scaled scores (t5, alibi) or None.
        Returns ctx [B, L, H] and C_l (None without residual attention)."""
        cfg = self.cfg
        q, k, v = (self.split_heads(lin(x)) for lin in (self.query, self.key, self.value))
        S = self.scores(q, k)
        if position_bias is not None:
            S = S + position_bias
        if cfg.residual_attention:
            carried = S if carried is None else carried + S
            logits = carried / self.layer_number if cfg.residual_attention_mean else carried
        else:
            carried, logits = None, S
        probs = torch.softmax(logits + mask_add[:, None, None, :], dim=-1)
        probs = dropout(probs, cfg.attention_dropout, self.training)
        ctx = torch.matmul(probs, v)  # [B, h, L, d]
        B, _, L, _ = ctx.shape
        return ctx.transpose(1, 2).reshape(B, L, cfg.hidden_size), carried


class DenseNorm(nn.Module):
    """Holds a dense layer and (optionally) a LayerNorm; the Layer decides how they combine."""

    def __init__(self, cfg, n_in, n_out, norm_width):
        super().__init__()
        self.dense = nn.Linear(n_in, n_out)
        if norm_width:
            self.LayerNorm = nn.LayerNorm(norm_width, eps=cfg.layer_norm_eps)


class Attention(nn.Module):
    def __init__(self, cfg, layer_number):
        super().__init__()
        self.self = SelfAttention(cfg, layer_number)
        self.output = DenseNorm(cfg, cfg.hidden_size, cfg.hidden_size, cfg.hidden_size)


class Layer(nn.Module):
    """post: h = LN_a(x + drop(Wo Attn(x)));      out = LN_o(h + drop(W2 gelu(W1 h)))
    pre:  h = x + drop(Wo Attn(LN_a(x)));      out = h + drop(W2 gelu(W1 LN_o(h)))
    LN_a = attention/output/LayerNorm, LN_o = output/LayerNorm."""

    def __init__(self, cfg, layer_number):
        super().__init__()
        self.cfg = cfg
        self.attention = Attention(cfg, layer_number)
        self.intermediate = DenseNorm(cfg, cfg.hidden_size, cfg.intermediate_size, 0)
        self.output = DenseNorm(cfg, cfg.intermediate_size, cfg.hidden_size, cfg.hidden_size)

    def forward(self, x, mask_add, carried, position_bias):
        p, train = self.cfg.hidden_dropout, self.training
        attn_out, ffn_out = self.attention.output, self.output
        ffn = lambda t: ffn_out.dense(gelu(self.intermediate.dense(t)))  # noqa: E731
        if self.cfg.norm == "post":
            ctx, carried = self.attention.self(x, mask_add, carried, position_bias)
            h = attn_out.LayerNorm(x + dropout(attn_out.dense(ctx), p, train))
            return ffn_out.LayerNorm(h + dropout(ffn(h), p, train)), carried
        ctx, carried = self.attention.self(attn_out.LayerNorm(x), mask_add, carried, position_bias)
        h = x + dropout(attn_out.dense(ctx), p, train)
        return h + dropout(ffn(ffn_out.LayerNorm(h)), p, train), carried


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.layer = nn.ModuleList(Layer(cfg, n + 1) for n in range(cfg.num_layers))
        if cfg.norm == "pre":
            self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        if cfg.relative_position == "t5":  # one table for the encoder, as in T5
            self.relative_attention_bias = nn.Embedding(cfg.t5_num_buckets, cfg.num_heads)

    def position_bias(self, L, dtype):
        """[heads, L, L] added to every layer's scaled scores: t5 b[bucket(j-i), h], alibi
        -m_h |i-j|; None for the other modes."""
        cfg = self.cfg
        if cfg.relative_position == "t5":
            buckets = t5_buckets(L, cfg.t5_num_buckets, cfg.t5_max_distance)
            return self.relative_attention_bias.weight[buckets].permute(2, 0, 1)
        if cfg.relative_position == "alibi":
            distance = (torch.arange(L).view(L, 1) - torch.arange(L).view(1, L)).abs()
            slopes = torch.tensor(alibi_slopes(cfg.num_heads), dtype=torch.float64)
            return (-slopes.view(-1, 1, 1) * distance).to(dtype)
        return None

    def forward(self, x, attention_mask):
        mask_add = (1 - attention_mask).to(x.dtype) * MASK_VALUE  # never accumulated into C
        carried, bias = None, self.position_bias(x.shape[1], x.dtype)
        for layer in self.layer:
            x, carried = layer(x, mask_add, carried, bias)
        return self.LayerNorm(x) if hasattr(self, "LayerNorm") else x


class Bert(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings, self.encoder = Embeddings(cfg), Encoder(cfg)


class Predictions(nn.Module):
    """logits = LN(gelu(W_t h + b_t)) E^T + bias; the decoder is the word-embedding matrix E."""

    def __init__(self, cfg):
        super().__init__()
        self.transform = DenseNorm(cfg, cfg.hidden_size, cfg.hidden_size, cfg.hidden_size)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, h, word_embeddings):
        t = self.transform.LayerNorm(gelu(self.transform.dense(h)))
        return t @ word_embeddings.t() + self.bias


class MLMHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.predictions = Predictions(cfg)


class BertForMaskedLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.bert, self.cls = Bert(cfg), MLMHead(cfg)

    def forward(self, batch):
        """batch: dict of [B, L] long tensors. Returns (mean CE loss, logits [N, V]) over the N
        labelled positions in row-major (b, l) order."""
        x = self.bert.embeddings(batch["input_ids"], batch["token_type_ids"])
        h = self.bert.encoder(x, batch["attention_mask"])
        labels = batch["labels"].reshape(-1)
        where = torch.nonzero(labels != IGNORE_LABEL).view(-1)  # ascending = row-major (b, l)
        word = self.bert.embeddings.word_embeddings.weight
        logits = self.cls.predictions(h.reshape(-1, h.shape[-1])[where], word)
        if len(where) == 0:
            return logits.sum() * 0, logits
        log_probs = torch.log_softmax(logits, dim=-1)
        loss = -log_probs[torch.arange(len(where)), labels[where]].mean()
        return loss, logits

    def forward_per_sequence(self, batch):
        """As forward, but each row b on its own: its real tokens (attention_mask's prefix of
        ones) as a batch [1, L_b] with no mask and no padding at all; the loss is the mean over
        every row's labelled positions, the logits the rows' in order (the same (b, l) order)."""
        lengths = batch["attention_mask"].sum(dim=1).tolist()
        hidden, labels = [], []
        for b, n in enumerate(lengths):
            if not batch["attention_mask"][b, :n].all() or batch["attention_mask"][b, n:].any():
                sys.exit(f"row {b}: --per-sequence needs each row's real tokens first")
            if n == 0:
                continue
            x = self.bert.embeddings(batch["input_ids"][b:b + 1, :n],
                                     batch["token_type_ids"][b:b + 1, :n])
            h = self.bert.encoder(x, batch["attention_mask"][b:b + 1, :n])  # all ones: mask 0
            hidden.append(h.reshape(n, -1))
            labels.append(batch["labels"][b, :n])
        h, labels = torch.cat(hidden), torch.cat(labels)
        where = torch.nonzero(labels != IGNORE_LABEL).view(-1)
        logits = self.cls.predictions(h[where], self.bert.embeddings.word_embeddings.weight)
        if len(where) == 0:
            return logits.sum() * 0, logits
        log_probs = torch.log_softmax(logits, dim=-1)
        return -log_probs[torch.arange(len(where)), labels[where]].mean(), logits

    def named_tensors(self):
        """{checkpoint name: parameter}, names as stored under /model."""
        return {name.replace(".", "/"): p for name, p in self.named_parameters()}


def decays(name):
    """AdamW weight decay applies to every parameter except biases and LayerNorm weights."""
    return not (name.endswith("bias") or "LayerNorm" in name)


# ---- files ---------------------------------------------------------------------------------

def read_group(f, group, path):
    out = {}
    f[group].visititems(lambda n, obj: out.__setitem__(n, obj[()])
                        if isinstance(obj, h5py.Dataset) else None)
    if not out:
        sys.exit(f"{path}: group /{group} holds no datasets")
    return out


def load_model(path, dtype):
    """(config, model with the checkpoint's /model parameters); every name and shape validated
    both ways. Other groups (/optimizer, /vocab, ...) are ignored."""
    with h5py.File(path, "r") as f:
        fmt, version = _attr_str(f.attrs, "format", path), f.attrs.get("version")
        if fmt != "realpos" or version != 1:
            sys.exit(f"{path}: expected format 'realpos' version 1, got '{fmt}' version {version}")
        cfg = Config(_attr_str(f.attrs, "config", path), path + ":config")
        stored = read_group(f, "model", path) if "model" in f else {}
    model = BertForMaskedLM(cfg).to(dtype)
    params = model.named_tensors()
    unexpected = sorted(set(stored) - set(params))
    if unexpected:
        sys.exit(f"{path}: unexpected dataset /model/{unexpected[0]} for this config")
    for name, p in params.items():
        if name not in stored:
            sys.exit(f"{path}: missing dataset /model/{name}")
        if tuple(stored[name].shape) != tuple(p.shape):
            sys.exit(f"{path}: /model/{name} has shape {stored[name].shape}, expected "
                     f"{tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(np.asarray(stored[name], dtype=np.float64)))
    return cfg, model


BATCH_KEYS = ("input_ids", "token_type_ids", "attention_mask", "labels")


def load_batch(path, cfg):
    with h5py.File(path, "r") as f:
        arrays = {}
        for key in BATCH_KEYS:
            if key not in f:
                sys.exit(f"{path}: missing dataset '{key}'")
            arrays[key] = np.asarray(f[key][()], dtype=np.int64)
    shape = arrays["input_ids"].shape
    checks = [(len(shape) == 2, "input_ids must be [B, L]")]
    checks += [(arrays[k].shape == shape, f"{k} shape {arrays[k].shape} != {shape}")
               for k in BATCH_KEYS]
    ids, types, mask, labels = (arrays[k] for k in BATCH_KEYS)
    checks += [(((ids >= 0) & (ids < cfg.vocab_size)).all(), "input_ids outside [0, vocab)"),
               (((types >= 0) & (types < cfg.type_vocab_size)).all(), "token_type_ids range"),
               (np.isin(mask, (0, 1)).all(), "attention_mask not 0/1"),
               (((labels == IGNORE_LABEL) | ((labels >= 0) & (labels < cfg.vocab_size))).all(),
                "labels outside [0, vocab) and != -100"),
               (not cfg.absolute_position or shape[1] <= cfg.max_position, "L > max_position")]
    for ok, message in checks:
        if not ok:
            sys.exit(f"{path}: {message}")
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


# ---- dump ----------------------------------------------------------------------------------

def adamw_step(params, grads, exp_avg, exp_avg_sq, step, opt, lr=None):
    """One AdamW step (torch.optim.AdamW semantics; bias correction optional). step is 1-based;
    lr: this step's learning rate (default opt.lr)."""
    lr = opt.lr if lr is None else lr
    with torch.no_grad():
        for name, p in params.items():
            g, m, v = grads[name], exp_avg[name], exp_avg_sq[name]
            if decays(name):
                p.mul_(1 - lr * opt.weight_decay)
            m.mul_(opt.beta1).add_((1 - opt.beta1) * g)
            v.mul_(opt.beta2).add_((1 - opt.beta2) * g * g)
            m_hat, v_hat = m, v
            if opt.bias_correction:
                m_hat = m / (1 - opt.beta1 ** step)
                v_hat = v / (1 - opt.beta2 ** step)
            p.sub_(lr * m_hat / (v_hat.sqrt() + opt.eps))


def warmup_steps(cfg, total):
    """train.warmup_proportion of the steps, rounded half away from zero, when it is > 0, else
    train.warmup_steps."""
    if cfg.warmup_proportion > 0:
        return int(math.floor(cfg.warmup_proportion * total + 0.5))
    return cfg.warmup_steps


def learning_rate(cfg, step, total):
    """The learning rate of 0-based step `step` of `total`: linear warm-up to optim.lr over
    warmup_steps, then linear or cosine decay to 0 or constant (float32, as the engine)."""
    peak, warm = np.float32(cfg.lr), warmup_steps(cfg, total)
    if step < warm:
        return float(peak * np.float32(step + 1) / np.float32(warm))
    if cfg.schedule == "constant" or total <= warm:
        return float(peak)
    progress = min(1.0, (step - warm) / (total - warm))
    if cfg.schedule == "linear":
        return float(np.float32(float(peak) * (1.0 - progress)))
    return float(np.float32(float(peak) * 0.5 * (1.0 + math.cos(math.pi * progress))))


def clip_gradients(grads, max_norm):
    """Global L2 norm of all gradients; scaled by max_norm / (norm + 1e-6) in place when the norm
    exceeds max_norm > 0 (torch.nn.utils.clip_grad_norm_'s rule). Returns the norm before."""
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
    if max_norm > 0 and norm > max_norm:
        for g in grads.values():
            g.mul_(max_norm / (norm + 1e-6))
    return norm


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
