#!/usr/bin/env python3
"""Writes torch's float16/bfloat16 CPU-generator normals for hipq's rng test.

    make_rng_reduced_reference.py OUT.safetensors [HIPQ_BINARY]

OUT gets, per (seed, n) below and dtype, tensor "<f16|bf16>_<seed>_<n>" =
torch.randn(n, generator=torch.Generator("cpu").manual_seed(seed), dtype=...),
which is what diffusers uses as the initial noise of a half-precision pipeline
(tests/data/rng/torch_randn_cpu_reduced.safetensors). With HIPQ_BINARY, each
case is also drawn with `hipq randn --dtype` and the fraction of bit-equal
values is printed (1.00000 everywhere when hipq matches this torch).
"""
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file
from safetensors.torch import save_file

CASES = [(0, 7), (1, 100), (2024, 1000), (1, 65536)]


def main():
    out = sys.argv[1]
    hipq = sys.argv[2] if len(sys.argv) > 2 else None
    ref = {}
    for dtype, name in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
        for seed, n in CASES:
            g = torch.Generator("cpu").manual_seed(seed)
            ref[f"{name}_{seed}_{n}"] = torch.randn(n, generator=g, dtype=dtype)
    save_file(ref, out, metadata={"torch_version": torch.__version__})
    if hipq is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        for key, t in ref.items():
            name, seed, n = key.split("_")
            path = f"{tmp}/{key}.safetensors"
            subprocess.run([hipq, "randn", "--seed", seed, "--shape", n, "--dtype", name, "--out", path], check=True)
            got = load_file(path)["noise"]
            want = t.float().numpy()
            same = np.mean(got.view(np.uint32) == want.view(np.uint32))
            print(f"{key}: hipq bit-equal {same:.5f}", flush=True)


if __name__ == "__main__":
    main()
