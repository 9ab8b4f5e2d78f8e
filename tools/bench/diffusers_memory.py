#!/usr/bin/env python3
"""diffusers' whole SDXL pipeline on one GPU: device memory and time per image.

    diffusers_memory.py MODEL_DIR --precision fp16 --images 4 [--size 1024] [--steps 30]

Runs StableDiffusionXLPipeline (or StableDiffusionPipeline) as a user would
(`pipe(prompt, ...)`, PIL images out: the VAE upcast to fp32 for SDXL fp16 as
the pipeline does) for --images prompts, and prints one JSON line:
torch.cuda.max_memory_allocated / max_memory_reserved over the loop, the
device memory in use as the driver reports it (nvidia-smi's memory.used is
sampled by the caller; here torch.cuda.mem_get_info after each image), and the
seconds per image (each synchronised). The counterpart of hipq's peak in
tools/bench/memory_bench.sh; the same exported weights.
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--guidance", type=float, default=5.0)
    ap.add_argument("--negative-prompt", default=None)
    ap.add_argument("--prompts-tsv", default=None, help="PartiPrompts-style TSV: the first column after the header")
    args = ap.parse_args()
    import diffusers

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.precision]
    index = json.load(open(f"{args.model}/model_index.json"))
    cls = getattr(diffusers, index["_class_name"])
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    pipe = cls.from_pretrained(args.model, torch_dtype=dtype).to("cuda")
    pipe.set_progress_bar_config(disable=True)
    prompts = ["a photograph of an astronaut riding a horse", "a watercolor painting of a lighthouse at dawn"]
    if args.prompts_tsv:
        with open(args.prompts_tsv, encoding="utf-8") as f:
            prompts = [line.split("\t")[0] for line in f.read().splitlines()[1:] if line.strip()][:args.images]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, used = [], []
    for i in range(args.images):
        g = torch.Generator("cpu").manual_seed(i)
        t0 = time.time()
        with torch.no_grad():
            pipe(prompt=prompts[i % len(prompts)], negative_prompt=args.negative_prompt, height=args.size, width=args.size,
                 num_inference_steps=args.steps, guidance_scale=args.guidance, generator=g)
        torch.cuda.synchronize()
        times.append(time.time() - t0)
        free, total = torch.cuda.mem_get_info()
        used.append(total - free)
    print(json.dumps({
        "peer": "diffusers " + diffusers.__version__, "pipeline": index["_class_name"], "precision": args.precision,
        "size": args.size, "steps": args.steps, "images": args.images,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "device_used_after_image_max": max(used), "seconds_per_image": times,
        "device": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
