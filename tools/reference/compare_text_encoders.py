#!/usr/bin/env python3
"""Compares hipq's SDXL-size text encoder outputs (written by
tests/engine/models/text_encoders_gpu_test with HIPQ_TEXT_ENCODER_DUMP) with
transformers' CLIPTextModel / CLIPTextModelWithProjection loaded from the
folder the same test exported (HIPQ_TEXT_ENCODER_EXPORT): cosine and max abs
error per output, for hipq's cpu f32 and hip f32/f16/bf16 runs.

Usage: compare_text_encoders.py --export DIR --dump FILE [--device cuda] [--json OUT]
"""
import argparse
import json
import os

import torch
from safetensors.torch import load_file
from transformers import CLIPTextModel, CLIPTextModelWithProjection


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    hipq = load_file(a.dump)
    rows = []
    for key, cls in (("text_encoder", CLIPTextModel), ("text_encoder_2", CLIPTextModelWithProjection)):
        model = cls.from_pretrained(os.path.join(a.export, key), torch_dtype=torch.float32).to(a.device).eval()
        ids = hipq[f"{key}.input_ids"].to(torch.long).to(a.device)
        o = model(ids, output_hidden_states=True)
        ref = {
            "penultimate": o.hidden_states[-2],
            "last_hidden_state": o.last_hidden_state,
            "pooled": o.text_embeds if hasattr(o, "text_embeds") else o.pooler_output,
        }
        for variant in ("cpu_f32", "hip_f32", "hip_f16", "hip_bf16"):
            for out, r in ref.items():
                h = hipq[f"{key}.{variant}.{out}"].to(a.device).double()
                r = r.double()
                cos = torch.nn.functional.cosine_similarity(h.flatten(), r.flatten(), dim=0).item()
                mx = (h - r).abs().max().item()
                rows.append({"encoder": key, "hipq": variant, "output": out, "cosine": cos, "max_abs": mx,
                             "ref_absmax": r.abs().max().item()})
    print(f"transformers on {a.device} (fp32, no TF32), torch {torch.__version__}")
    print("| encoder | hipq run | output | cosine vs transformers | max abs | ref abs max |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['encoder']} | {r['hipq']} | {r['output']} | {r['cosine']:.7f} | {r['max_abs']:.3g} | {r['ref_absmax']:.3g} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
