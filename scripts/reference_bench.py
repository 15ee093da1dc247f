#!/usr/bin/python3
"""`reference.py bench`: time full training steps (forward, backward, AdamW) of the reference
model in float32 on random data, in PyTorch's efficient form: the MLM head only at labelled
positions, nn.functional ops, the shaw/method4 relative terms as q.A^T gathered to [L, L] (method3
keeps the materialising form). Reports tokens/s and peak RSS (ru_maxrss, which includes the ~240
MB of the torch import, also reported on its own)."""
import json
import resource
import time

import torch

from reference import IGNORE_LABEL, BertForMaskedLM, decays, load_config

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
        loss, _ = model(random_batch())
        loss.backward()
        optimizer.step()
        return float(loss)

    for _ in range(args.warmup):
        train_step()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = train_step()
    seconds = time.perf_counter() - start
    result = dict(
        engine="pytorch-reference", torch=torch.__version__, threads=args.threads,
        config=args.config, overrides=args.set, batch_size=B, seq_len=L, steps=args.steps,
        warmup=args.warmup, label_frac=args.label_frac,
        relative_position=cfg.relative_position, residual_attention=cfg.residual_attention,
        seconds_per_step=seconds / args.steps, tokens_per_s=B * L * args.steps / seconds,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        rss_after_import_mb=rss_before / 1024.0, last_loss=loss, note=BENCH_NOTES.get(
            cfg.relative_position, "relative scores: scalar table gathered to [L, L]"))
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0
