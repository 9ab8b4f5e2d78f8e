#!/usr/bin/env python3
"""Writes the small LoRA files the tiny-model adapter goldens use (tests/data/lora/).

They are shaped like the files people have, so that diffusers' own loader
(load_lora_weights) takes them as it takes real ones; the fuzz corpus's files
are minimal instead (one layer each) and two of them are refused by diffusers
for that reason alone:
  - peft-full-metadata.safetensors: a PEFT/diffusers file whose
    "lora_adapter_metadata" carries the LoraConfig as diffusers writes it
    (r, lora_alpha and target_modules; without target_modules PEFT cannot tell
    which layers of a UNet to wrap);
  - kohya-te1-te2-full.safetensors: a kohya text-encoder LoRA touching q, k, v
    and out of a layer (diffusers tells the old-diffusers layout by its out_proj
    keys) in text encoder 1 and attention out + MLP fc1 in text encoder 2.
    (The reference of 2026-12-05, diffusers 0.40.0.dev0 with transformers
    5.17, loads no kohya text-encoder LoRA at all: it finds no rank for any
    layer and fails in get_peft_kwargs. Text-encoder merges are checked
    against an fp64 merge in tests/engine/lora/ instead.)
Shapes are those of synthetic:tiny-sdxl (hidden 32, MLP 64, UNet mid block 64).
With --sdxl FILE it writes instead a kohya LoRA for the full SDXL base
UNet (rank 4; every attention projection of every transformer block,
diffusers-style kohya names: 560 pairs), for the full-size parity run
(tools/bench/sdxl_parity.sh); about 20 MB, made where it is used, not committed.
Deterministic; no dependency beyond Python.

  tools/golden/make_lora_files.py tests/data/lora
  tools/golden/make_lora_files.py --sdxl /tmp/sdxl-lora.safetensors
"""
import json
import os
import struct
import sys


def values(n, phase):
    # A fixed pattern in [-0.25, 0.25]: enough to move the image, never large.
    return [0.25 * (((i * 37 + phase * 11) % 101) / 50.0 - 1.0) for i in range(n)]


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, (shape, data) in tensors.items():
        blob = struct.pack("<%df" % len(data), *data)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(tmp, path)


def pair(down_shape, up_shape, phase):
    return ((down_shape, values(down_shape[0] * down_shape[1], phase)),
            (up_shape, values(up_shape[0] * up_shape[1], phase + 1)))


def sdxl_lora(path):
    """kohya names (diffusers-style) over SDXL base's attention layers."""
    rank, t, phase = 4, {}, 0

    def add(name, n_in, n_out):
        nonlocal phase
        d = [0.08 * v for v in values(rank * n_in, phase)]
        u = [0.08 * v for v in values(n_out * rank, phase + 1)]
        phase += 2
        t[name + ".lora_down.weight"] = ([rank, n_in], d)
        t[name + ".lora_up.weight"] = ([n_out, rank], u)
        t[name + ".alpha"] = ([], [float(rank)])

    blocks = [("down_blocks_1", 2, 2, 640), ("down_blocks_2", 2, 10, 1280), ("mid_block", 1, 10, 1280),
              ("up_blocks_0", 3, 10, 1280), ("up_blocks_1", 3, 2, 640)]
    for block, attentions, depth, c in blocks:
        for a in range(attentions):
            for b in range(depth):
                pre = "lora_unet_%s_attentions_%d_transformer_blocks_%d_" % (block, a, b)
                for attn, ctx in (("attn1", c), ("attn2", 2048)):
                    add(pre + attn + "_to_q", c, c)
                    add(pre + attn + "_to_k", ctx, c)
                    add(pre + attn + "_to_v", ctx, c)
                    add(pre + attn + "_to_out_0", c, c)
    write_safetensors(path, t)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--sdxl":
        sdxl_lora(sys.argv[2])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/lora"
    os.makedirs(out, exist_ok=True)

    a, b = pair([2, 64], [64, 2], 0)
    write_safetensors(os.path.join(out, "peft-full-metadata.safetensors"), {
        "unet.mid_block.attentions.0.proj_out.lora_A.weight": a,
        "unet.mid_block.attentions.0.proj_out.lora_B.weight": b,
    }, {"lora_adapter_metadata": json.dumps({
        "unet.r": 2, "unet.lora_alpha": 4,
        "unet.target_modules": ["mid_block.attentions.0.proj_out"]}, sort_keys=True)})

    t = {}
    layers = [("lora_te1_text_model_encoder_layers_0_self_attn_%s" % p, [2, 32], [32, 2])
              for p in ("q_proj", "k_proj", "v_proj", "out_proj")]
    layers += [("lora_te2_text_model_encoder_layers_1_self_attn_out_proj", [2, 32], [32, 2]),
               ("lora_te2_text_model_encoder_layers_1_mlp_fc1", [2, 32], [64, 2])]
    for i, (name, ds, us) in enumerate(layers):
        d, u = pair(ds, us, 2 * i + 3)
        t[name + ".lora_down.weight"] = d
        t[name + ".lora_up.weight"] = u
        t[name + ".alpha"] = ([], [1.0])
    write_safetensors(os.path.join(out, "kohya-te1-te2-full.safetensors"), t)


if __name__ == "__main__":
    main()
