#!/usr/bin/env python3
"""A host function for `plugboard run --callback host_scale='python3 examples/host_scale.py'`.

plugboard runs it once per call with the operand .npy files, then the result .npy files to write:
    host_scale.py IN0.npy OUT0.npy
It multiplies a float32 array by 10. Standard library only (no numpy), to show the file protocol."""
import ast
import struct
import sys


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    major = data[6]
    header_len, start = (struct.unpack("<H", data[8:10])[0], 10) if major == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    header = ast.literal_eval(data[start:start + header_len].decode("latin1"))
    if header["descr"] != "<f4":
        sys.exit(f"{path}: host_scale takes float32, got {header['descr']}")
    body = data[start + header_len:]
    return header["shape"], list(struct.unpack(f"<{len(body) // 4}f", body))


def write_npy(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (tuple(shape),)
    header = header.ljust(64 * ((10 + len(header) + 1 + 63) // 64) - 10 - 1) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))


shape, values = read_npy(sys.argv[1])
write_npy(sys.argv[2], shape, [v * 10 for v in values])
