#!/usr/bin/python3
"""Configuration of the reference model (part of tests/reference/reference.py): the [model],
[optim] and optional [train] keys of an INI text or a checkpoint's stored config, typed as the
engine types them (float keys are float32)."""
import configparser
import os
import subprocess
import sys

import h5py
import numpy as np

REL_MODES = ("none", "shaw", "method1", "method2", "method3", "method4", "t5", "alibi", "rope")
IGNORE_LABEL = -100
REALPOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "realpos")


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
            text = attr_str(f.attrs, "config", path)
        return Config(apply_overrides(text, overrides), path)
    if os.path.exists(REALPOS):
        cmd = [REALPOS, "config", path] + [a for o in overrides for a in ("--set", o)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode == 0:
            return Config(run.stdout, path)
    with open(path) as f:
        return Config(apply_overrides(f.read(), overrides), path)


def attr_str(attrs, name, path):
    if name not in attrs:
        sys.exit(f"{path}: missing root attribute '{name}'")
    value = attrs[name]
    return value.decode() if isinstance(value, bytes) else str(value)
