#!/usr/bin/python3
"""Files of the reference (part of tests/reference/reference.py): a realpos checkpoint's /model
parameters into the reference model, and a batch file, each validated."""
import sys

import h5py
import numpy as np
import torch

from reference_config import IGNORE_LABEL, Config, attr_str
from reference_model import BertForMaskedLM


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
        fmt, version = attr_str(f.attrs, "format", path), f.attrs.get("version")
        if fmt != "realpos" or version != 1:
            sys.exit(f"{path}: expected format 'realpos' version 1, got '{fmt}' version {version}")
        cfg = Config(attr_str(f.attrs, "config", path), path + ":config")
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
