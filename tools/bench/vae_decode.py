#!/usr/bin/env python3
"""The VAE decode of one 1024 px SDXL image: hipq against PyTorch on the same GPU and weights.

    python3 tools/bench/vae_decode.py --model DIFFUSERS_FOLDER --hipq HIPQ_BINARY \
        [--precision bf16 fp32] [--size 1024] [--json OUT.json]

- hipq: the "decode" phase of `hipq generate --steps 2` at that precision (its
  timings.json, device time): fp32 decodes in fp32 (fp16 jobs too, as SDXL's VAE
  is upcast), bf16 jobs decode in bf16.
- PyTorch (diffusers' AutoencoderKL, same folder, TF32 off): vae.decode of the
  latent divided by the scaling factor, at that dtype; eager, and the same call
  captured once in a torch.cuda.CUDAGraph and replayed. Median of --iters calls
  timed with CUDA events after warm-up.

Prints one table with hipq time / PyTorch time per mode; --json writes every figure.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unet_step import capture_graph, cuda_timed, hipq_step_ms  # noqa: E402


def torch_decode_ms(model_dir, precision, size, iters, warmup):
    import torch
    from diffusers import AutoencoderKL

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[precision]
    dev = torch.device("cuda")
    vae = AutoencoderKL.from_pretrained(os.path.join(model_dir, "vae"), torch_dtype=dtype).to(dev).eval()
    g = torch.Generator(device="cpu").manual_seed(0)
    latent = (torch.randn(1, vae.config.latent_channels, size // 8, size // 8, generator=g) /
              vae.config.scaling_factor).to(dev, dtype)

    def call():
        return vae.decode(latent, return_dict=False)[0]

    def timed(fn):
        median, least = cuda_timed(fn, warmup, iters)
        return {"median_ms": median, "min_ms": least}

    out = {}
    with torch.inference_mode():
        out["eager"] = timed(call)
        graph = capture_graph(call, warmup=2)
        out["graph"] = timed(graph.replay)
        del graph
    del vae
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="diffusers folder (e.g. from `hipq weights export synthetic:sdxl`)")
    ap.add_argument("--hipq", required=True, help="the hipq binary")
    ap.add_argument("--precision", nargs="+", default=["bf16", "fp32"])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", help="write all figures here")
    a = ap.parse_args()
    results = {}
    print(f"\n### VAE decode, {a.size} px\n")
    print("| precision | PyTorch eager ms | PyTorch graph ms | hipq ms | hipq / fastest PyTorch |")
    print("|---|---:|---:|---:|---:|")
    for p in a.precision:
        t = torch_decode_ms(a.model, p, a.size, a.iters, a.warmup)
        h = hipq_step_ms(a.hipq, a.model, p, a.size, 2, {})
        decode = h["phases_ms"].get("decode")
        results[p] = {"torch": t, "hipq_decode_ms": decode}
        best = min(v["median_ms"] for v in t.values())
        ratio = f"{decode / best:.2f}x" if decode else "—"
        print(f"| {p} | {t['eager']['median_ms']:.2f} | {t['graph']['median_ms']:.2f} | "
              f"{decode if decode is None else round(decode, 2)} | {ratio} |")
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
