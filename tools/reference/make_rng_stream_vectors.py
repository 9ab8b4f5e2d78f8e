#!/usr/bin/env python3
"""Writes tests/data/rng/torch_randn_cpu_stream.json: successive draws from
one CPU torch.Generator, as diffusers makes them when a stochastic sampler
(Euler a, DPM++ SDE, ...) continues the stream that made the initial latent:

    g = torch.Generator("cpu").manual_seed(seed)
    for numel, dtype in draws: torch.randn(numel, generator=g, dtype=dtype)

For each draw: numel, dtype, SHA-256 of the float32 little-endian bytes of the
values (widened to float32) and the bit patterns of the first and last 8.
Run with a Python that has torch:

    python3 tools/reference/make_rng_stream_vectors.py OUT.json
"""
import hashlib
import json
import platform
import struct
import sys

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# (seed, [(numel, dtype), ...]): the small sizes cross torch's serial path
# (n < 16, with the generator's cached second normal), the 16-block path and
# its redrawn tail; 256 and 1024 are latents of tiny models.
CASES = [
    (1, [(256, "f32"), (256, "f32"), (256, "f32"), (256, "f32")]),
    (7, [(24, "f32"), (24, "f32"), (24, "f32")]),
    (3, [(5, "f32"), (3, "f32"), (16, "f32"), (7, "f32"), (40, "f32")]),
    (11, [(256, "f16"), (256, "f16"), (256, "f32"), (256, "bf16")]),
    (2**32 + 9, [(1024, "f32"), (1024, "f32")]),
    (5, [(1, "f32"), (1, "f32"), (1, "f16"), (17, "f32")]),
]


def bits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    out = {
        "generator": "torch %s, %s" % (torch.__version__, platform.machine()),
        "cases": [],
    }
    for seed, draws in CASES:
        g = torch.Generator("cpu").manual_seed(seed)
        rows = []
        for numel, dt in draws:
            v = torch.randn(numel, generator=g, dtype=DTYPES[dt]).to(torch.float32)
            raw = struct.pack("<%df" % numel, *v.tolist())
            vals = v.tolist()
            rows.append({
                "numel": numel, "dtype": dt,
                "sha256": hashlib.sha256(raw).hexdigest(),
                "head": [bits(x) for x in vals[:8]],
                "tail": [bits(x) for x in vals[-8:]],
            })
        out["cases"].append({"seed": str(seed), "draws": rows})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
