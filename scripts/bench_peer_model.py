#!/usr/bin/python3
"""The tuned PyTorch peer's model (scripts/bench_peer.py): a BERT encoder written the way a PyTorch
1.13 user who cares about CPU speed writes it, for timing only (tests/reference/reference_model.py
is the parity reference). Its choices, each kept because it measured faster or is what BERT does:
  - one fused QKV nn.Linear(H, 3H) per layer (one product of [T, H] x [H, 3H] instead of three);
  - q scaled by 1/sqrt(d) before q.k^T ([T, d] multiplies, not [B, heads, L, L]);
  - torch.matmul attention on [B, heads, L, d] views, torch.softmax, F.gelu (exact erf GELU);
  - no additive mask when every position is real (the MLM rows), a [B, 1, 1, L] one otherwise;
  - Method 4 (and Shaw) as q.A^T and k.A^T [B, heads, L, 2k+1] gathered to [L, L] (never an
    [L, L, d] table); residual attention carries the scaled scores S as in RealFormer;
  - dropout where BERT has it (embeddings, attention probabilities, both sub-layer outputs);
  - the MLM head (transform, layer norm, tied decoder) only at the labelled positions;
  - under torch.autocast('cpu', bfloat16) layer norms run in fp32 (their input cast up: torch
    1.13's CPU layer_norm takes no bf16 input with fp32 weights), as realpos does.
Parameters are initialised N(0, init_range), layer norms (1, 0), biases 0."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def layer_norm(module, x):
    """fp32 layer norm of x whatever its dtype (under autocast x may be bf16)."""
    return F.layer_norm(x.float(), module.normalized_shape, module.weight, module.bias, module.eps)


class PeerLayer(nn.Module):
    def __init__(self, cfg, layer_number):
        super().__init__()
        H, self.heads, self.d = cfg.hidden_size, cfg.num_heads, cfg.head_dim
        self.cfg, self.layer_number = cfg, layer_number
        self.qkv = nn.Linear(H, 3 * H)
        self.attn_out = nn.Linear(H, H)
        self.ln_attn = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.ff_in = nn.Linear(H, cfg.intermediate_size)
        self.ff_out = nn.Linear(cfg.intermediate_size, H)
        self.ln_out = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.relative = cfg.relative_position in ("shaw", "method4")
        if self.relative:
            self.table = nn.Parameter(torch.empty(2 * cfg.relative_k + 1, self.d))  # a_t, t = r(i,j)

    def forward(self, x, mask_add, carried, r):
        """x [B, L, H]; mask_add [B, 1, 1, L] or None; carried C_{l-1} [B, heads, L, L] or None;
        r [L, L] = clip(i - j, -k, k) + k (relative modes) or None. Returns (out, C_l)."""
        B, L, H = x.shape
        cfg, p, train = self.cfg, self.cfg.hidden_dropout, self.training
        qkv = self.qkv(x).view(B, L, 3, self.heads, self.d).permute(2, 0, 3, 1, 4)  # [3, B, h, L, d]
        scale = 1.0 / math.sqrt(self.d)
        q, k, v = qkv[0] * scale, qkv[1], qkv[2]
        S = torch.matmul(q, k.transpose(-1, -2))  # [B, h, L, L], scaled
        if self.relative:
            table = self.table.to(q.dtype) if q.dtype != self.table.dtype else self.table
            q_a = torch.matmul(q, table.t())  # [B, h, L, 2k+1]: q_i . a_t / sqrt(d)
            S = S + torch.gather(q_a, 3, r.expand(B, self.heads, L, L))
            if cfg.relative_position == "method4":
                k_a = torch.matmul(k, table.t()) * scale  # [B, h, L(j), 2k+1]
                S = S + torch.gather(k_a, 3, r.t().expand(B, self.heads, L, L)).transpose(2, 3)
        if cfg.residual_attention:
            carried = S if carried is None else carried + S
            S = carried / self.layer_number if cfg.residual_attention_mean else carried
        if mask_add is not None:
            S = S + mask_add
        probs = F.dropout(torch.softmax(S, dim=-1), cfg.attention_dropout, train)
        ctx = torch.matmul(probs.to(v.dtype), v).transpose(1, 2).reshape(B, L, H)
        h = layer_norm(self.ln_attn, x + F.dropout(self.attn_out(ctx), p, train))
        f = self.ff_out(F.gelu(self.ff_in(h)))
        return layer_norm(self.ln_out, h + F.dropout(f, p, train)), carried


class PeerBert(nn.Module):
    """Embeddings, post-norm encoder layers and one of two heads: 'mlm' (tied decoder at the
    labelled positions) or a token classifier of num_labels ('tagging')."""

    def __init__(self, cfg, head="mlm", num_labels=0):
        super().__init__()
        H, self.cfg, self.head = cfg.hidden_size, cfg, head
        if cfg.norm != "post" or cfg.relative_position not in ("none", "shaw", "method4"):
            raise SystemExit(f"bench_peer: implements post-norm with absolute, shaw or method4 positions, "
                             f"got norm = {cfg.norm}, relative_position = {cfg.relative_position}")
        self.word = nn.Embedding(cfg.vocab_size, H)
        self.position = nn.Embedding(cfg.max_position, H) if cfg.absolute_position else None
        self.token_type = nn.Embedding(cfg.type_vocab_size, H)
        self.ln_embed = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(PeerLayer(cfg, n + 1) for n in range(cfg.num_layers))
        if head == "mlm":
            self.transform = nn.Linear(H, H)
            self.ln_head = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
            self.decoder_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        else:
            self.classifier = nn.Linear(H, num_labels)
        with torch.no_grad():
            for name, t in self.named_parameters():
                if name.startswith("ln") or ".ln" in name:
                    t.fill_(1.0 if name.endswith("weight") else 0.0)
                elif name.endswith("bias"):
                    t.zero_()
                else:
                    t.normal_(0.0, cfg.init_range)

    def forward(self, ids, types, mask_add, labels):
        """ids, types, labels [B, L] (labels -100 where unlabelled); mask_add [B, 1, 1, L] or
        None. Returns the mean cross-entropy over the labelled positions."""
        cfg, (B, L) = self.cfg, ids.shape
        x = self.word(ids) + self.token_type(types)
        if self.position is not None:
            x = x + self.position.weight[:L]
        x = F.dropout(layer_norm(self.ln_embed, x), cfg.hidden_dropout, self.training)
        r = None
        if cfg.relative_position in ("shaw", "method4"):
            i = torch.arange(L, device=ids.device)
            r = ((i.view(L, 1) - i.view(1, L)).clamp(-cfg.relative_k, cfg.relative_k) + cfg.relative_k)
        carried = None
        for layer in self.layers:
            x, carried = layer(x, mask_add, carried, r)
        flat = labels.view(-1)
        where = torch.nonzero(flat != -100).view(-1)
        h = x.reshape(B * L, -1).index_select(0, where)
        if self.head == "mlm":
            t = layer_norm(self.ln_head, F.gelu(self.transform(h)))
            logits = F.linear(t, self.word.weight, self.decoder_bias)
        else:
            logits = self.classifier(h)
        return F.cross_entropy(logits.float(), flat.index_select(0, where))


def weight_decay_groups(model, weight_decay):
    """AdamW groups as BERT (and realpos) decay: every weight except biases, layer norms."""
    decay, plain = [], []
    for name, t in model.named_parameters():
        (plain if name.endswith("bias") or name.startswith("ln") or ".ln" in name else decay).append(t)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
