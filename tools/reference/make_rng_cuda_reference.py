#!/usr/bin/env python3
"""Writes reference values of torch.randn on the CUDA generator:
torch.randn(shape, generator=torch.Generator("cuda").manual_seed(seed), device="cuda"),
with the GPU's SM count and threads per SM (they decide torch's launch grid).
For each case: seed, shape, and (index, value) pairs sampled across the tensor.

    python3 tools/reference/make_rng_cuda_reference.py OUT.json
"""
import json
import sys

import torch

CASES = [(0, [1, 4, 128, 128]), (42, [1, 4, 128, 128]), (7, [5]), (1, [17]), (123, [1000]),
         (9, [2, 4, 96, 96]), (5, [1, 4, 512, 512]), (2**40 + 3, [3, 333])]


def main():
    props = torch.cuda.get_device_properties(0)
    out = {
        "produced_by": "tools/reference/make_rng_cuda_reference.py, torch %s, CUDA %s, %s" % (
            torch.__version__, torch.version.cuda, props.name),
        "multiprocessors": props.multi_processor_count,
        "max_threads_per_sm": getattr(props, "max_threads_per_multi_processor", 2048),
        "cases": [],
    }
    for seed, shape in CASES:
        g = torch.Generator("cuda").manual_seed(seed)
        t = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).flatten().cpu()
        n = t.numel()
        idx = sorted(set(list(range(min(n, 64))) + list(range(max(0, n - 64), n)) + list(range(0, n, max(1, n // 500)))))
        out["cases"].append({"seed": str(seed), "shape": shape, "numel": n,
                             "index": idx, "value": [float(t[i]) for i in idx]})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
