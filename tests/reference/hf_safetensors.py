#!/usr/bin/python3
"""safetensors files and HuggingFace model folders (part of tests/reference/hf_reference.py), read and
written with numpy from the format's definition: an 8-byte little-endian header length, a JSON
header {name: {dtype, shape, data_offsets}}, the raw little-endian data."""
import json
import os
import struct

import numpy as np
import torch

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """{name: float64 or int array}; BF16 is widened by shifting its bits into a float32."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = data[begin:end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(buf, dtype=np.dtype(DTYPES[info["dtype"]]).newbyteorder("<"))
        out[name] = array.reshape(info["shape"])
    return out


def write_safetensors(path, tensors, dtype):
    """tensors: {name: array}; float arrays stored as dtype (F32, F16, BF16), ints as I64."""
    header, chunks, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        if np.issubdtype(array.dtype, np.integer):
            kind, blob = "I64", array.astype("<i8").tobytes()
        elif dtype == "BF16":  # round to nearest even, as torch does
            bits = torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16).view(torch.int16)
            kind, blob = "BF16", bits.numpy().astype("<i2").tobytes()
        else:
            kind, blob = dtype, array.astype(np.dtype(DTYPES[dtype]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": kind, "shape": list(array.shape),
                        "data_offsets": [at, at + len(blob)]}
        chunks.append(blob)
        at += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def read_folder(folder):
    """(config dict, {name: array}) of an HF folder, sharded or not."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for name in files:
            tensors.update(read_safetensors(os.path.join(folder, name)))
    else:
        tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    return config, tensors
