#!/usr/bin/env python3
"""Writes tests/data/rng/torch_randn_cpu.json: reference values of
torch.randn(shape, generator=torch.Generator("cpu").manual_seed(seed)).

For each case: seed, shape, numel, the SHA-256 of the float32 little-endian
bytes of the whole tensor, and the bit patterns of the first and last values.
Run with a Python that has torch: python3 tools/reference/make_rng_vectors.py OUT.json
"""
import hashlib
import json
import platform
import struct
import sys

import torch

CASES = [
    (0, [1, 4, 128, 128]),
    (42, [1, 4, 128, 128]),
    (1234567, [2, 4, 96, 80]),
    (0, [1]), (1, [5]), (2, [15]), (3, [16]), (4, [17]), (5, [31]), (6, [33]),
    (7, [3, 7, 11]), (8, [1000]), (9, [4, 64, 64]), (10, [1, 4, 64, 64 + 3]),
    (2**32 + 5, [40]), (2**63 + 11, [19]), (123, [2]), (99, [1, 4, 128, 129]),
]


def bits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    capability = "unknown"
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            capability = line.split(":", 1)[1].strip()
    out = {
        "generator": "torch %s, %s, CPU capability %s" % (torch.__version__, platform.machine(), capability),
        "cases": [],
    }
    for seed, shape in CASES:
        g = torch.Generator("cpu").manual_seed(seed)
        t = torch.randn(shape, generator=g, dtype=torch.float32).contiguous()
        flat = t.flatten().tolist()
        raw = t.numpy().astype("<f4").tobytes()
        out["cases"].append({
            "seed": str(seed),
            "shape": shape,
            "numel": len(flat),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "head": [bits(v) for v in flat[:24]],
            "tail": [bits(v) for v in flat[-24:]],
        })
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
