#!/usr/bin/env python3
"""Per-stage reference tensors from diffusers, for hipq's stage checks.

For one prompt/seed on a model folder (from `hipq weights export`) this writes
one safetensors file with what each stage of the pipeline sees and produces:

  ids_1, ids_2         I64 [1, 77]   token ids of the prompt (tokenizer, tokenizer_2 for SDXL)
  prompt_embeds        F32 [2, 77, D] encoder_hidden_states as the UNet gets them (negative, positive)
  pooled_embeds        F32 [2, P]    SDXL text_embeds (negative, positive)
  unet_input           F32 [2, 4, h, w] first step's scaled model input
  unet_timestep        F32 [1]       first step's timestep
  unet_output          F32 [2, 4, h, w] the UNet's raw output for that input
  vae_input            F32 [1, 4, h, w] a latent already divided by the scaling factor
  vae_output           F32 [1, 3, H, W] the VAE decoder's output for it

Metadata: the settings (GenerationSettings JSON), versions, device.
The negative prompt is diffusers' None (SDXL: zeros). Run in fp32, TF32 off.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_key  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--height", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()

    import numpy as np
    import torch
    import diffusers
    from diffusers.utils.torch_utils import randn_tensor
    from safetensors.numpy import save_file

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with open(os.path.join(args.model, "model_index.json")) as f:
        cls_name = json.load(f)["_class_name"]
    kw = {"safety_checker": None, "requires_safety_checker": False} if cls_name == "StableDiffusionPipeline" else {}
    pipe = getattr(diffusers, cls_name).from_pretrained(args.model, torch_dtype=torch.float32, **kw).to(device)
    sdxl = cls_name == "StableDiffusionXLPipeline"
    h, w = args.height, args.width
    out = {}

    def ids(tok):
        return np.array([tok(args.prompt, padding="max_length", max_length=tok.model_max_length,
                             truncation=True).input_ids], dtype="<i8")

    out["ids_1"] = ids(pipe.tokenizer)
    if sdxl:
        out["ids_2"] = ids(pipe.tokenizer_2)
    with torch.no_grad():
        if sdxl:
            pe, npe, ppe, nppe = pipe.encode_prompt(args.prompt, device=device, num_images_per_prompt=1,
                                                    do_classifier_free_guidance=True, negative_prompt=None)
            out["pooled_embeds"] = torch.cat([nppe, ppe]).float().cpu().numpy()
        else:
            pe, npe = pipe.encode_prompt(args.prompt, device, 1, True, negative_prompt=None)
        hidden = torch.cat([npe, pe])
        out["prompt_embeds"] = hidden.float().cpu().numpy()

        sched = diffusers.EulerDiscreteScheduler.from_config(pipe.scheduler.config)
        sched.set_timesteps(args.steps, device=device)
        gen = torch.Generator("cpu").manual_seed(args.seed)
        lat = randn_tensor((1, 4, h // 8, w // 8), generator=gen, device=torch.device(device),
                           dtype=torch.float32) * sched.init_noise_sigma
        t = sched.timesteps[0]
        inp = sched.scale_model_input(torch.cat([lat] * 2), t)
        kwargs = {}
        if sdxl:
            time_ids = torch.tensor([[h, w, 0, 0, h, w]] * 2, dtype=torch.float32, device=device)
            kwargs["added_cond_kwargs"] = {"text_embeds": torch.cat([nppe, ppe]), "time_ids": time_ids}
        eps = pipe.unet(inp, t, encoder_hidden_states=hidden, return_dict=False, **kwargs)[0]
        out["unet_input"] = inp.float().cpu().numpy()
        out["unet_timestep"] = np.array([float(t)], dtype="<f4")
        out["unet_output"] = eps.float().cpu().numpy()

        z = (lat / sched.init_noise_sigma) * 0.5  # a latent of unit-ish scale, already "divided"
        dec = pipe.vae.decode(z, return_dict=False)[0]
        out["vae_input"] = z.float().cpu().numpy()
        out["vae_output"] = dec.float().cpu().numpy()

    settings = {"prompt": args.prompt, "negative_prompt": "", "seed": args.seed, "width": w, "height": h,
                "steps": args.steps, "sampler": "euler", "precision": "fp32", "rng": "torch-cpu"}
    meta = {
        "format": "hipq-stages/1",
        "settings": golden_key.settings_json(settings),
        "pipeline_class": cls_name,
        "diffusers_version": diffusers.__version__,
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
    }
    out = {k: np.ascontiguousarray(v.astype("<f4") if v.dtype.kind == "f" else v) for k, v in out.items()}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_file(out, args.out, metadata=meta)
    print("wrote", args.out, {k: list(v.shape) for k, v in out.items()})


if __name__ == "__main__":
    main()
