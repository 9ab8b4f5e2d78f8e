#!/usr/bin/env python3
"""Reference outputs for hipq's model tests, computed by transformers and
diffusers (PyTorch, fp32, CPU) on folders written by `hipq weights export`.

For each exported tiny model it
  1. loads the folder with diffusers' pipeline `from_pretrained` and runs it
     (2 steps, 64x64) to show the export loads and runs unchanged;
  2. evaluates each component on fixed inputs and writes inputs + outputs to
     <out>/<name>.safetensors, with provenance in the metadata:
       text encoders: ids of a prompt and of "" (each tokenizer's padding),
         hidden_states[-2], last_hidden_state, pooled (text_embeds for the
         projection model);
       unet: one evaluation, batch of 2 (sample, timesteps, context
         [, text_embeds, time_ids]) -> noise prediction;
       vae: decode of a random latent, untiled and tiled (tile 32 px).

Usage: make_model_references.py --model tiny-sdxl=DIR --model tiny-sd15=DIR \
           --sha tiny-sdxl=HEX --sha tiny-sd15=HEX --out OUTDIR
"""
import argparse
import json
import os
import platform
import subprocess
import sys

import torch
from safetensors.torch import save_file


def provenance(args_sha):
    import diffusers
    import transformers

    commit = ""
    src = os.path.dirname(os.path.dirname(os.path.abspath(diffusers.__file__)))
    try:
        commit = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return {
        "producer": "tools/reference/make_model_references.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "diffusers": diffusers.__version__ + (f" ({commit})" if commit else ""),
        "python": platform.python_version(),
        "device": "cpu",
        "dtype": "float32",
        "weights_sha256": args_sha,
    }


def run_pipeline(name, folder, sdxl):
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    cls = StableDiffusionXLPipeline if sdxl else StableDiffusionPipeline
    pipe = cls.from_pretrained(folder, torch_dtype=torch.float32)
    image = pipe(prompt="a photograph of an astronaut riding a horse", num_inference_steps=2, height=64, width=64,
                 guidance_scale=5.0, generator=torch.Generator("cpu").manual_seed(0), output_type="np").images
    print(f"{name}: {cls.__name__}.from_pretrained({folder}) ran: image {image.shape}, "
          f"mean {image.mean():.4f}, std {image.std():.4f}, finite {bool(torch.isfinite(torch.from_numpy(image)).all())}")
    return pipe


@torch.no_grad()
def references(name, pipe, sdxl, meta, out_dir):
    g = torch.Generator("cpu").manual_seed(1234)
    t = {}
    prompts = ["a photograph of an astronaut riding a horse", ""]

    def encode(tok, enc, key):
        ids = tok(prompts, padding="max_length", max_length=tok.model_max_length, truncation=True,
                  return_tensors="pt").input_ids
        o = enc(ids, output_hidden_states=True)
        t[f"{key}.input_ids"] = ids.to(torch.int32).contiguous()
        t[f"{key}.penultimate"] = o.hidden_states[-2].contiguous()
        t[f"{key}.last_hidden_state"] = o.last_hidden_state.contiguous() if hasattr(o, "last_hidden_state") and o.last_hidden_state is not None else o[0]
        if hasattr(o, "text_embeds"):
            t[f"{key}.pooled"] = o.text_embeds.contiguous()
        else:
            t[f"{key}.pooled"] = o.pooler_output.contiguous()

    encode(pipe.tokenizer, pipe.text_encoder, "text_encoder")
    if sdxl:
        encode(pipe.tokenizer_2, pipe.text_encoder_2, "text_encoder_2")

    unet = pipe.unet
    cfg = unet.config
    sample = torch.randn((2, cfg.in_channels, 8, 8), generator=g)
    timesteps = torch.tensor([999.0, 421.0])
    ctx = torch.randn((2, 77, cfg.cross_attention_dim), generator=g)
    kwargs = {}
    t["unet.sample"] = sample
    t["unet.timesteps"] = timesteps
    t["unet.encoder_hidden_states"] = ctx
    if sdxl:
        pooled_dim = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
        text_embeds = torch.randn((2, pooled_dim), generator=g)
        time_ids = torch.tensor([[64.0, 64.0, 0.0, 0.0, 64.0, 64.0], [96.0, 80.0, 8.0, 16.0, 64.0, 64.0]])
        kwargs["added_cond_kwargs"] = {"text_embeds": text_embeds, "time_ids": time_ids}
        t["unet.text_embeds"] = text_embeds
        t["unet.time_ids"] = time_ids
    t["unet.out"] = unet(sample, timesteps, encoder_hidden_states=ctx, **kwargs).sample.contiguous()

    vae = pipe.vae
    z = torch.randn((1, vae.config.latent_channels, 8, 8), generator=g)
    t["vae.latent"] = z
    vae.disable_tiling()
    t["vae.decoded"] = vae.decode(z).sample.contiguous()
    vae.enable_tiling()
    vae.tile_sample_min_size = 32
    vae.tile_latent_min_size = 32 // (2 ** (len(vae.config.block_out_channels) - 1))
    vae.tile_overlap_factor = 0.25
    t["vae.decoded_tiled_32"] = vae.decode(z).sample.contiguous()
    vae.disable_tiling()

    path = os.path.join(out_dir, f"{name}.safetensors")
    save_file({k: v.contiguous() for k, v in t.items()}, path, metadata={k: str(v) for k, v in meta.items()})
    for k, v in sorted(t.items()):
        print(f"  {k:40s} {tuple(v.shape)} absmax {v.float().abs().max().item():.4g}")
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--sha", action="append", default=[], help="NAME=weights sha256 (hipq's)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    shas = dict(s.split("=", 1) for s in a.sha)
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for spec in a.model:
        name, folder = spec.split("=", 1)
        index = json.load(open(os.path.join(folder, "model_index.json")))
        sdxl = index["_class_name"] == "StableDiffusionXLPipeline"
        pipe = run_pipeline(name, folder, sdxl)
        meta = provenance(shas.get(name, ""))
        meta["model"] = f"synthetic:{name}"
        references(name, pipe, sdxl, meta, a.out)


if __name__ == "__main__":
    sys.exit(main())
