#!/usr/bin/python3
"""The engine's training step written out for the reference (part of tests/reference/reference.py):
AdamW, the learning-rate schedule, gradient clipping by the global norm."""
import math

import numpy as np
import torch

from reference_model import decays


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
