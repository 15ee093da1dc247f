#!/usr/bin/python3
"""The reference model (part of tests/reference/reference.py): BertForMaskedLM in PyTorch with
Shaw's and Methods 1-4's relative terms, T5, ALiBi, RoPE and residual attention, in the slow,
obvious form (the relative terms materialise [L, L, d] tables). Parameter names are HuggingFace
BertForMaskedLM state_dict keys with '.' -> '/'; they come from the module hierarchy below."""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from reference_config import IGNORE_LABEL
from reference_positions import alibi_slopes, relative_table_shape, rope, t5_buckets

MASK_VALUE = -10000.0


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
