#!/usr/bin/env python3
"""Add or refresh the realpos checksum of HDF5 files (docs/checkpoint.md, "Checksum").

realpos verifies every HDF5 file it reads against a CRC-32 of the file body kept in the file's
512-byte user block, and refuses files without one. Run this on a file you trust after writing or
editing it with another tool (h5py): a file that already has the 512-byte user block is sealed in
place; a file without one (an older realpos, plain h5py) is rewritten with one first.

    /usr/bin/python3 scripts/h5seal.py FILE.h5 [FILE.h5 ...]
    /usr/bin/python3 scripts/h5seal.py --verify FILE.h5     # exit 1 unless the checksum matches

In Python: `import h5seal; h5seal.create(path)` opens a new h5py file with the user block,
`h5seal.seal(path)` writes the checksum after it is closed.
"""
import os
import sys
import zlib

import h5py

USER_BLOCK = 512
MAGIC = b"realpos-checksum 1\n"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def create(path):
    """A new h5py file with the user block realpos keeps its checksum in; seal(path) after close."""
    return h5py.File(path, "w", userblock_size=USER_BLOCK)


def body_crc(path):
    crc, size = 0, 0
    with open(path, "rb") as f:
        f.seek(USER_BLOCK)
        while chunk := f.read(1 << 20):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return crc, size


def _add_user_block(path):
    """Rewrite a file that has no user block into one that has (every object and attribute)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with h5py.File(path, "r") as src, create(tmp) as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        for name in src:
            src.copy(src[name], dst, name)
    os.replace(tmp, path)


def seal(path):
    with open(path, "rb") as f:
        start = f.read(8)
    if start == HDF5_SIGNATURE:
        _add_user_block(path)
    else:
        with h5py.File(path, "r") as f:  # raises unless HDF5 with a user block
            if f.userblock_size != USER_BLOCK:
                raise SystemExit(f"{path}: user block of {f.userblock_size} bytes, expected {USER_BLOCK}")
    crc, size = body_crc(path)
    header = MAGIC + f"crc32 {crc:08x}\nbytes {size}\n".encode()
    with open(path, "r+b") as f:
        f.write(header.ljust(USER_BLOCK, b"\0"))
        f.flush()
        os.fsync(f.fileno())


def verify(path):
    """None if the checksum matches, else the reason."""
    with open(path, "rb") as f:
        header = f.read(USER_BLOCK)
    if not header.startswith(MAGIC):
        return "no realpos checksum header"
    fields = dict(line.split(" ", 1) for line in header[len(MAGIC):].split(b"\0", 1)[0].decode().split("\n")
                  if " " in line)
    crc, size = body_crc(path)
    if int(fields.get("bytes", -1)) != size or int(fields.get("crc32", "0"), 16) != crc:
        return f"checksum mismatch (body {size} bytes, crc32 {crc:08x}; header {fields})"
    return None


def main(argv):
    check = argv[:1] == ["--verify"]
    paths = argv[1:] if check else argv
    if not paths:
        raise SystemExit(__doc__)
    status = 0
    for path in paths:
        if check:
            problem = verify(path)
            print(f"{path}: {problem or 'checksum verified'}")
            status |= problem is not None
        else:
            seal(path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
