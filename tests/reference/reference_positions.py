#!/usr/bin/python3
"""Position schemes of the reference model (part of tests/reference/reference.py): the relative
tables' shapes, T5 buckets, ALiBi slopes, RoPE; written from the math, never from the C code."""
import math

import torch


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
