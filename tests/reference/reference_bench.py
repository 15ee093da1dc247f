#!/usr/bin/python3
"""`reference.py bench`: time full training steps (forward, backward, AdamW) of the reference
model in float32 on random data, in PyTorch's efficient form: the MLM head only at labelled
positions, nn.functional ops, the shaw/method4 relative terms as q.A^T gathered to [L, L] (method3
keeps the materialising form). Reports tokens/s and peak RSS (ru_maxrss, which includes the ~240
MB of the torch import, also reported on its own)."""
import ctypes
import json
import os
import resource
import statistics
import time

import torch

from reference_config import IGNORE_LABEL, load_config
from reference_model import BertForMaskedLM, decays

def random_init(model, cfg, generator):
    with torch.no_grad():
        for name, p in model.named_tensors().items():
            if "LayerNorm" in name and name.endswith("weight"):
                p.fill_(1.0)
            elif name.endswith("bias"):
                p.zero_()
            elif cfg.relative_position in ("method1", "method2") and "distance" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, cfg.init_range, generator=generator)


BENCH_NOTES = {
    "none": "plain scaled dot-product attention",
    "shaw": "q.A^T [B, heads, L, 2k+1] gathered to [L, L]",
    "method4": "q.A^T and k.A^T [B, heads, L, 2k+1] gathered to [L, L]",
    "method3": "materialises a [L, L, d] table and a [B, heads, L, L, d] product (slow form)",
}


def host_info():
    """CPU model, the OpenBLAS kernel family torch's BLAS calls run on (torch 1.13 from Debian calls
    the system libblas.so.3, i.e. OpenBLAS), and OPENBLAS_CORETYPE as found (never set here)."""
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    core = None
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        pass
    capability = [line.split(":", 1)[1].strip() for line in torch.__config__.show().splitlines()
                  if "CPU capability usage" in line]
    return {"cpu_model": model, "openblas_corename": core,
            "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
            "torch_cpu_capability": capability[0] if capability else None}


def cmd_bench(args):
    torch.set_num_threads(args.threads)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cfg = load_config(args.config, args.set)
    generator = torch.Generator().manual_seed(0)
    model = BertForMaskedLM(cfg)
    random_init(model, cfg, generator)
    for layer in model.bert.encoder.layer:
        layer.attention.self.efficient = True
    model.train()
    if args.autocast_bf16:
        # torch 1.13's CPU autocast has no fp32 policy for layer_norm: a bf16 input (the MLM head's
        # gelu(dense(h))) meets the fp32 weight and fails. Layer norms run in fp32, as autocast
        # does on CUDA and as realpos does: the input is cast up.
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.forward = (lambda m: lambda x: torch.nn.functional.layer_norm(
                    x.float(), m.normalized_shape, m.weight, m.bias, m.eps))(module)
    params = model.named_tensors()
    groups = [{"params": [p for n, p in params.items() if decays(n)],
               "weight_decay": cfg.weight_decay},
              {"params": [p for n, p in params.items() if not decays(n)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)
    B, L, V = args.batch_size, args.seq_len, cfg.vocab_size

    def random_batch():
        ids = torch.randint(0, V, (B, L), generator=generator)
        labelled = torch.rand((B, L), generator=generator) < args.label_frac
        labels = torch.where(labelled, torch.randint(0, V, (B, L), generator=generator),
                             torch.full((B, L), IGNORE_LABEL))
        return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
                "attention_mask": torch.ones_like(ids), "labels": labels}

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        # bf16 mixed precision as PyTorch users get it: the forward under autocast (its matmuls and
        # linears in bf16 with fp32 accumulation), the backward following the forward's dtypes
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast_bf16):
            loss, _ = model(random_batch())
        loss.backward()
        optimizer.step()
        return float(loss)

    for _ in range(args.warmup):
        train_step()
    step_seconds, cpu_start = [], time.process_time()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = train_step()
        step_seconds.append(time.perf_counter() - t0)
    seconds, cpu_seconds = sum(step_seconds), time.process_time() - cpu_start
    result = dict(
        engine="pytorch-reference", torch=torch.__version__, threads=args.threads,
        config=args.config, overrides=args.set, batch_size=B, seq_len=L, steps=args.steps,
        warmup=args.warmup, label_frac=args.label_frac,
        precision="bf16-autocast" if args.autocast_bf16 else "fp32",
        relative_position=cfg.relative_position, residual_attention=cfg.residual_attention,
        seconds_per_step=seconds / args.steps, tokens_per_s=B * L * args.steps / seconds,
        step_seconds=step_seconds, median_step_s=statistics.median(step_seconds),
        cpu_seconds_per_step=cpu_seconds / args.steps, torch_threads=torch.get_num_threads(),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        rss_after_import_mb=rss_before / 1024.0, last_loss=loss, note=BENCH_NOTES.get(
            cfg.relative_position, "relative scores: scalar table gathered to [L, L]"), **host_info())
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0
