#!/usr/bin/env python3
"""One SDXL-class UNet denoising step: hipq against PyTorch on the same GPU and weights.

    python3 tools/bench/unet_step.py --model DIFFUSERS_FOLDER --hipq HIPQ_BINARY \
        [--precision fp16 bf16] [--size 1024] [--modes eager graph compile] [--json OUT.json]

The step is one UNet evaluation of the classifier-free-guidance batch (2 latents
of size/8 x size/8), the shape of every step of a 1024 px SDXL image.

- hipq: `hipq generate --steps N` on the folder; the step time is the median of
  its per-step device timings (timings.json "steps", the first step left out),
  which cover the UNet call, the guidance combine and the scheduler update.
- PyTorch (diffusers' UNet2DConditionModel, same folder, TF32 off):
    eager    the module called from Python;
    graph    the same call captured once in a torch.cuda.CUDAGraph and replayed;
    compile  torch.compile(unet) (default mode), after its compilation.
  Each is the median of --iters calls timed with CUDA events after warm-up.

Prints one table per precision with hipq time / PyTorch time for each mode and
the fastest; --json writes every figure. Needs torch and diffusers (put a
diffusers checkout's src/ on PYTHONPATH when it is not installed).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def cuda_timed(fn, warmup, iters):
    """(median ms, min ms) of `iters` calls of fn timed with CUDA events, after `warmup` calls."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times)


def capture_graph(call, warmup=3):
    """`call` captured once in a torch.cuda.CUDAGraph (after warm-up calls on a side stream)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            call()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph


def torch_step_ms(model_dir, precision, size, modes, iters, warmup):
    import torch
    from diffusers import UNet2DConditionModel

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[precision]
    dev = torch.device("cuda")
    unet = UNet2DConditionModel.from_pretrained(os.path.join(model_dir, "unet"), torch_dtype=dtype).to(dev).eval()
    cfg = unet.config
    lat = size // 8
    g = torch.Generator(device="cpu").manual_seed(0)
    sample = torch.randn(2, cfg.in_channels, lat, lat, generator=g).to(dev, dtype)
    t = torch.tensor([999.0, 999.0], device=dev)
    ehs = torch.randn(2, 77, cfg.cross_attention_dim, generator=g).to(dev, dtype)
    kwargs = {}
    if cfg.addition_embed_type == "text_time":
        pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
        kwargs["added_cond_kwargs"] = {
            "text_embeds": torch.randn(2, pooled, generator=g).to(dev, dtype),
            "time_ids": torch.tensor([[size, size, 0, 0, size, size]] * 2, device=dev, dtype=dtype),
        }

    def call(m):
        return m(sample, t, encoder_hidden_states=ehs, return_dict=False, **kwargs)[0]

    def timed(fn):
        return cuda_timed(fn, warmup, iters)

    out = {}
    with torch.inference_mode():
        if "eager" in modes:
            out["eager"] = timed(lambda: call(unet))
        if "graph" in modes:
            graph = capture_graph(lambda: call(unet))
            out["graph"] = timed(graph.replay)
            del graph
        if "compile" in modes:
            compiled = torch.compile(unet)
            t0 = time.time()
            call(compiled)
            torch.cuda.synchronize()
            print(f"  torch.compile took {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
            out["compile"] = timed(lambda: call(compiled))
    del unet
    torch.cuda.empty_cache()
    return {k: {"median_ms": v[0], "min_ms": v[1]} for k, v in out.items()}


def hipq_step_ms(hipq, model_dir, precision, size, steps, extra_env):
    with tempfile.TemporaryDirectory() as d:
        cmd = [hipq, "generate", "--model", model_dir, "--prompt", "a photograph of an astronaut riding a horse",
               "--seed", "0", "--width", str(size), "--height", str(size), "--steps", str(steps),
               "--guidance", "5", "--precision", precision, "--backend", "hip", "--no-progress", "--out", d]
        env = dict(os.environ, **extra_env)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"hipq generate failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        files = glob.glob(os.path.join(d, "**", "*timings*.json"), recursive=True)
        if not files:
            raise RuntimeError(f"hipq generate wrote no timings json in {d}:\n{r.stdout}")
        with open(files[0]) as f:
            j = json.load(f)
    steps_ms = [s["gpu_ms"] for s in j["steps"]][1:]
    phases = {p["phase"]: p["gpu_ms"] for p in j["phases"]}
    return {"median_ms": statistics.median(steps_ms), "min_ms": min(steps_ms), "phases_ms": phases,
            "peak_memory_bytes": j.get("peak_memory_bytes")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="diffusers folder (e.g. from `hipq weights export synthetic:sdxl`)")
    ap.add_argument("--hipq", required=True, help="the hipq binary")
    ap.add_argument("--precision", nargs="+", default=["fp16", "bf16"])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--modes", nargs="+", default=["eager", "graph", "compile"])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--hipq-steps", type=int, default=8, help="steps of the hipq generate run")
    ap.add_argument("--hipq-env", action="append", default=[],
                    help="NAME=VALUE[,NAME=VALUE...] for one more hipq run, e.g. HIPQ_NO_WGMMA=1 or "
                         "HIPQ_ATTN_WGMMA=3,HIPQ_ATTN_WGMMA_KEYS=any")
    ap.add_argument("--json", help="write all figures here")
    a = ap.parse_args()

    results = {}
    for p in a.precision:
        row = {"torch": torch_step_ms(a.model, p, a.size, a.modes, a.iters, a.warmup)}
        row["hipq"] = hipq_step_ms(a.hipq, a.model, p, a.size, a.hipq_steps, {})
        for kv in a.hipq_env:
            env = dict(part.partition("=")[::2] for part in kv.split(",") if part)
            row["hipq " + kv] = hipq_step_ms(a.hipq, a.model, p, a.size, a.hipq_steps, env)
        results[p] = row
        fastest = min(row["torch"].items(), key=lambda kv: kv[1]["median_ms"])
        print(f"\n### UNet step, {a.size} px, CFG batch 2, {p}\n")
        print("| side | mode | median ms | min ms | hipq / this |")
        print("|---|---|---:|---:|---:|")
        h = row["hipq"]["median_ms"]
        for mode, v in row["torch"].items():
            print(f"| PyTorch | {mode} | {v['median_ms']:.2f} | {v['min_ms']:.2f} | {h / v['median_ms']:.2f}x |")
        for name in [k for k in row if k.startswith("hipq")]:
            v = row[name]
            print(f"| {name} | own loop | {v['median_ms']:.2f} | {v['min_ms']:.2f} | "
                  f"{v['median_ms'] / fastest[1]['median_ms']:.2f}x of {fastest[0]} |")
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
