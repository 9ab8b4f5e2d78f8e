#!/usr/bin/env python3
"""Make hipq golden files with the reference implementation (diffusers).

For every job (a manifest's prompts x seeds, or settings given on the command
line) this runs diffusers' StableDiffusionXLPipeline / StableDiffusionPipeline
(with an init_image: StableDiffusionXLImg2ImgPipeline / StableDiffusionImg2ImgPipeline,
image= and strength=, on the same modules) on a model folder written by `hipq weights export`, exactly as a user with
diffusers would: the folder's scheduler config (turned into the scheduler the
job's sampler names), generator = torch.Generator("cpu").manual_seed(seed)
(rng "torch-cpu"), output_type="latent" for the final latent, then the VAE
decode and diffusers' postprocess for the image (a job with vae_precision
decodes with the VAE cast to that dtype, torch.bfloat16 for "bf16", and
diffusers' upcast off; hipq's decode does the same). Each job's golden is written
as OUT/<key>.safetensors with full provenance (docs/golden-format.md); the key
is computed as hipq computes it (golden_key.py).

Examples:
  make_goldens.py --model tiny-sdxl/ --weights-sha256 SHA --out goldens/ \\
      --prompt "a red fox" --seed 1 --seed 2 --width 64 --height 64 --steps 4
  make_goldens.py --model sdxl/ --weights-sha256 SHA --manifest batch.yaml --out goldens/
  make_goldens.py --model tiny-sdxl/ --weights-sha256 SHA --jobs jobs.json --out goldens/

--weights-sha256 must be what hipq reports for the same folder (`hipq weights
sha256 DIR`, or the "weights_sha256" of a latent.safetensors hipq wrote); it
ties the golden to the weights. Without it the script computes it the way
hipq does for a diffusers folder (see weights_sha256_of_folder).

SDXL refiner (docs/pipeline.md, "Refiner"):
  - base + refiner jobs (settings "refiner" set; --refiner FOLDER the refiner's
    `hipq weights export`): diffusers' ensemble of experts, the base pipeline
    with denoising_end=refiner_switch_at and output_type="latent", then
    StableDiffusionXLImg2ImgPipeline from FOLDER with denoising_start=
    refiner_switch_at, image=that latent, aesthetic_score /
    negative_aesthetic_score and the same generator object; the refiner's
    VAE decodes;
  - the refiner as the img2img model (--model a refiner folder, whose
    model_index.json is StableDiffusionXLImg2ImgPipeline): init_image and
    strength with the job's aesthetic scores.
  make_goldens.py --model tiny-sdxl/ --refiner tiny-sdxl-refiner/ --jobs jobs-refiner.json --out goldens/
"""
import argparse
import contextlib
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_key  # noqa: E402

GOLDEN_FORMAT = "hipq-golden/1"
# hipq decodes tiled above this many latent pixels (engine/pipeline.h,
# LoadOptions::vae_tile_above_latent_pixels); the goldens follow the same rule.
VAE_TILE_ABOVE_LATENT_PIXELS = 128 * 128


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _component_weight_files(d):
    """The weight files hipq reads for one component folder (engine/model_files.cpp):
    a single diffusion_pytorch_model[.fp16].safetensors / model[.fp16].safetensors,
    else the shards of a *.safetensors.index.json, sorted."""
    for base in ("diffusion_pytorch_model", "model"):
        for variant in ("", ".fp16"):
            single = os.path.join(d, base + variant + ".safetensors")
            if os.path.isfile(single):
                return [single]
    for base in ("diffusion_pytorch_model", "model"):
        for variant in ("", ".fp16"):
            for idx in (base + ".safetensors" + variant + ".index.json", base + variant + ".safetensors.index.json"):
                p = os.path.join(d, idx)
                if os.path.isfile(p):
                    with open(p) as f:
                        shards = sorted(set(json.load(f)["weight_map"].values()))
                    return [os.path.join(d, s) for s in shards]
    return []


def weights_sha256_of_folder(folder):
    """hipq's identity of a diffusers folder's weights (engine/model_files.h,
    weights_sha256): sha256 over the concatenated hex sha256 of each weight
    file, components in the order unet, vae, text_encoder, text_encoder_2."""
    h = hashlib.sha256()
    for comp in ("unet", "vae", "text_encoder", "text_encoder_2"):
        d = os.path.join(folder, comp)
        if os.path.isdir(d):
            for f in _component_weight_files(d):
                h.update(sha256_file(f).encode())
    return h.hexdigest()


def diffusers_commit(diffusers_module):
    """The git commit of the diffusers checkout in use, when it is one."""
    src = os.path.dirname(os.path.abspath(diffusers_module.__file__))
    for root in (os.path.dirname(os.path.dirname(src)), os.path.dirname(src)):
        if os.path.isdir(os.path.join(root, ".git")):
            try:
                return subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=True).stdout.strip()
            except (OSError, subprocess.CalledProcessError):
                return ""
    return ""


def load_jobs(args):
    """Settings dicts (GenerationSettings fields) for every job."""
    common = {}
    for field in ("negative_prompt", "width", "height", "steps", "guidance", "sampler", "precision", "rng",
                  "timestep_spacing", "guidance_rescale", "init_image", "strength", "refiner_switch_at",
                  "aesthetic_score", "negative_aesthetic_score", "vae_precision"):
        v = getattr(args, field, None)
        if v is not None:
            common[field] = v
    jobs = []
    if args.jobs:
        with open(args.jobs) as f:
            for s in json.load(f):
                jobs.append(dict(common, **s))
    if args.manifest:
        jobs += jobs_from_manifest(args.manifest, common)
    for p in args.prompt or []:
        for seed in args.seed or [0]:
            jobs.append(dict(common, prompt=p, seed=seed))
    if not jobs:
        sys.exit("make_goldens: no jobs: give --prompt/--seed, --jobs FILE or --manifest FILE")
    return jobs


def _seed_list(v):
    """seeds: [a, b] | 7 | {from: A, count: N} (docs/manifest.md)."""
    if isinstance(v, dict):
        first = int(v.get("from", 0))
        return list(range(first, first + int(v["count"])))
    if isinstance(v, list):
        return [int(x) for x in v]
    return [int(v)]


def _prompt_file_entries(base_dir, spec):
    """Entries of one prompts_file: path | {path, column, limit, format}."""
    if isinstance(spec, str):
        spec = {"path": spec}
    path = os.path.join(base_dir, spec["path"])
    fmt = spec.get("format", "auto")
    if fmt == "auto":
        fmt = os.path.splitext(path)[1].lstrip(".").lower()
    entries = []
    with open(path, encoding="utf-8") as f:
        if fmt == "jsonl":
            entries = [json.loads(line) for line in f if line.strip()]
        elif fmt == "tsv":
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
            header = [h.strip() for h in rows[0]]
            want = (spec.get("column") or "Prompt").lower()
            col = 0 if len(header) == 1 else [h.lower() for h in header].index(want)
            lower = [h.lower() for h in header]
            for row in rows[1:]:
                e = {"prompt": row[col]}
                if "negative" in lower:
                    e["negative"] = row[lower.index("negative")]
                for name in ("seed", "seeds"):
                    if name in lower and row[lower.index(name)].strip():
                        e["seeds"] = [int(x) for x in row[lower.index(name)].replace(",", " ").split()]
                entries.append(e)
        else:
            entries = [{"prompt": line.strip()} for line in f if line.strip() and not line.lstrip().startswith("#")]
    limit = spec.get("limit")
    return entries[:int(limit)] if limit else entries


def jobs_from_manifest(path, common):
    """Prompts x seeds of a hipq manifest (docs/manifest.md): defaults, then
    per-prompt overrides. Repeats share a golden, so they are not repeated.
    For anything this reader does not follow, give --jobs with the settings
    hipq expanded instead."""
    import yaml  # PyYAML, a dependency of transformers/diffusers
    with open(path, encoding="utf-8") as f:
        m = yaml.safe_load(f)
    base_dir = os.path.dirname(os.path.abspath(path))
    d = dict(common)
    defaults = m.get("defaults", {}) or {}
    for field in ("negative_prompt", "width", "height", "steps", "guidance", "sampler", "precision", "rng",
                  "timestep_spacing", "guidance_rescale", "init_image", "strength", "vae_precision"):
        if field in defaults:
            d[field] = defaults[field]
    # Paths in a manifest are relative to its folder (docs/manifest.md).
    if d.get("init_image") and "init_image" in defaults:
        d["init_image"] = os.path.join(base_dir, d["init_image"])
    if defaults.get("loras"):
        d["loras"] = [{"path": os.path.join(base_dir, l["path"]), "scale": float(l.get("scale", 1.0))}
                      for l in defaults["loras"]]
    ref = defaults.get("refiner")
    if isinstance(ref, dict):
        # {model, switch_at, aesthetic_score, negative_aesthetic_score} (docs/manifest.md)
        d["refiner"] = ref.get("model", "")
        for src, dst in (("switch_at", "refiner_switch_at"), ("aesthetic_score", "aesthetic_score"),
                         ("negative_aesthetic_score", "negative_aesthetic_score")):
            if src in ref:
                d[dst] = ref[src]
    elif ref:
        d["refiner"] = ref
    for field in ("aesthetic_score", "negative_aesthetic_score"):
        if field in defaults:
            d[field] = defaults[field]
    seeds = _seed_list(defaults.get("seeds", [0]))
    entries = []
    for p in m.get("prompts", []) or []:
        entries.append({"prompt": p} if isinstance(p, str) else dict(p))
    files = m.get("prompts_file", [])
    if isinstance(files, (str, dict)):
        files = [files]
    for spec in files or []:
        entries += _prompt_file_entries(base_dir, spec)
    jobs = []
    for e in entries:
        s = dict(d)
        s["prompt"] = e.get("text", e.get("prompt", ""))
        if "negative" in e:
            s["negative_prompt"] = e["negative"]
        for k in ("width", "height", "steps", "guidance", "sampler", "precision", "rng", "timestep_spacing",
                  "guidance_rescale", "vae_precision"):
            if k in e:
                s[k] = e[k]
        for seed in (_seed_list(e["seeds"]) if "seeds" in e else seeds):
            jobs.append(dict(s, seed=seed))
    return jobs


# hipq sampler name -> (diffusers scheduler class, config overrides): the scheduler
# a user picks for it (docs/samplers.md; the same rows as
# tools/reference/make_sampler_trajectories.py's SAMPLERS).
SCHEDULERS = {
    "euler": ("EulerDiscreteScheduler", {}),
    "euler_karras": ("EulerDiscreteScheduler", {"use_karras_sigmas": True}),
    "euler_ancestral": ("EulerAncestralDiscreteScheduler", {}),
    "ddim": ("DDIMScheduler", {}),
    "dpmpp_2m": ("DPMSolverMultistepScheduler", {"algorithm_type": "dpmsolver++", "solver_order": 2}),
    "dpmpp_2m_karras": ("DPMSolverMultistepScheduler", {"algorithm_type": "dpmsolver++", "solver_order": 2,
                                                        "use_karras_sigmas": True}),
    "dpmpp_2m_sde": ("DPMSolverMultistepScheduler", {"algorithm_type": "sde-dpmsolver++", "solver_order": 2}),
    "dpmpp_2m_sde_karras": ("DPMSolverMultistepScheduler", {"algorithm_type": "sde-dpmsolver++", "solver_order": 2,
                                                            "use_karras_sigmas": True}),
    "dpmpp_3m_sde": ("DPMSolverMultistepScheduler", {"algorithm_type": "sde-dpmsolver++", "solver_order": 3}),
    "dpmpp_3m_sde_karras": ("DPMSolverMultistepScheduler", {"algorithm_type": "sde-dpmsolver++", "solver_order": 3,
                                                            "use_karras_sigmas": True}),
    "heun": ("HeunDiscreteScheduler", {}),
    "heun_karras": ("HeunDiscreteScheduler", {"use_karras_sigmas": True}),
    "dpm2": ("KDPM2DiscreteScheduler", {}),
    "dpm2_karras": ("KDPM2DiscreteScheduler", {"use_karras_sigmas": True}),
    "dpm2_ancestral": ("KDPM2AncestralDiscreteScheduler", {}),
    "dpm2_ancestral_karras": ("KDPM2AncestralDiscreteScheduler", {"use_karras_sigmas": True}),
    "lms": ("LMSDiscreteScheduler", {}),
    "lms_karras": ("LMSDiscreteScheduler", {"use_karras_sigmas": True}),
    "unipc": ("UniPCMultistepScheduler", {"solver_order": 2, "solver_type": "bh2", "predict_x0": True}),
    "deis": ("DEISMultistepScheduler", {"solver_order": 2}),
    "ddpm": ("DDPMScheduler", {}),
    "lcm": ("LCMScheduler", {}),
}


def make_scheduler(cfg, sampler, timestep_spacing=""):
    """The scheduler a hipq sampler name means, from the folder's scheduler config
    (with the job's timestep spacing when it names one)."""
    import diffusers
    if timestep_spacing:
        cfg = dict(cfg, timestep_spacing=timestep_spacing)
    if sampler not in SCHEDULERS:
        sys.exit("make_goldens: unknown sampler %r (known: %s)" % (sampler, ", ".join(SCHEDULERS)))
    cls, overrides = SCHEDULERS[sampler]
    return getattr(diffusers, cls).from_config(cfg, **overrides)


def jsonable(config):
    import math
    out = {}
    for k, v in dict(config).items():
        if isinstance(v, float) and not math.isfinite(v):
            out[k] = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")  # JSON has no Infinity
        elif isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)):
            out[k] = list(v)
        else:
            out[k] = str(v)
    return out


def parse_lora(text):
    """PATH[:SCALE] as hipq generate --lora reads it (spec/lora_spec.h): the last ':' splits when
    what follows is a number; scale 1 otherwise."""
    path, sep, tail = text.rpartition(":")
    if sep:
        try:
            return path, float(tail)
        except ValueError:
            pass
    return text, 1.0


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fuse_loras(pipe, loras):
    """The LoRAs folded into the UNet / text encoder weights, each with its scale, as hipq does
    before the first step: diffusers' load_lora_weights (kohya and diffusers/PEFT formats),
    set_adapters with the scales, fuse_lora (PEFT merges W + scale * alpha/r * B @ A), then the
    adapter modules are dropped so the step runs the fused weights alone."""
    names = []
    for i, (path, _) in enumerate(loras):
        name = "lora%d" % i
        pipe.load_lora_weights(path, adapter_name=name)
        names.append(name)
    pipe.set_adapters(names, adapter_weights=[scale for _, scale in loras])
    pipe.fuse_lora(adapter_names=names, lora_scale=1.0)
    pipe.unload_lora_weights()


REFINER_FIELDS = ("refiner", "refiner_switch_at", "aesthetic_score", "negative_aesthetic_score")
# GenerationSettings' defaults (spec/generation_settings.h).
REFINER_DEFAULTS = {"refiner": "", "refiner_switch_at": 0.8, "aesthetic_score": 6.0, "negative_aesthetic_score": 2.5}


def refiner_settings(job):
    """The job's refiner fields with hipq's defaults (golden_key.full_settings may not know them)."""
    return {k: job[k] if job.get(k) is not None else REFINER_DEFAULTS[k] for k in REFINER_FIELDS}


def aesthetic_kwargs(r):
    """aesthetic_score / negative_aesthetic_score as hipq holds them (float32)."""
    return {"aesthetic_score": float(golden_key.as_float32(r["aesthetic_score"])),
            "negative_aesthetic_score": float(golden_key.as_float32(r["negative_aesthetic_score"]))}


@contextlib.contextmanager
def img2img_noise_drawn_in(run, job_dtype, is_img2img):
    """An img2img job's noise as the job's precision draws it, whatever the reference computes in.

    The img2img pipelines' prepare_latents draws the noise added to the encoded init image with
    randn_tensor in the pipeline's dtype; with --compute-precision fp32 for an fp16/bf16 job the
    reference must start from the job's draw (in its dtype, then cast), as the text-to-image
    reference does with `latents`. SDXL encodes the init image in fp32 whatever the precision
    (force_upcast), so the encoder's own draw is the same on both sides. A base + refiner job's
    refiner stage (denoising_start) adds no noise; its base stage gets `latents`."""
    module = sys.modules[type(run).__module__]
    original = getattr(module, "randn_tensor", None)
    if not is_img2img or original is None:
        yield
        return

    def drawn_in_job_dtype(shape, generator=None, device=None, dtype=None, layout=None):
        noise = original(shape, generator=generator, device=device, dtype=job_dtype, layout=layout)
        return noise.to(dtype) if dtype is not None else noise

    module.randn_tensor = drawn_in_job_dtype
    try:
        yield
    finally:
        module.randn_tensor = original


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="diffusers folder (from `hipq weights export`)")
    ap.add_argument("--model-name", help="model name recorded in the golden (default: --model as given)")
    ap.add_argument("--weights-sha256", help="hipq's weights sha256 of the folder")
    ap.add_argument("--out", required=True, help="directory for <key>.safetensors")
    ap.add_argument("--manifest", help="hipq manifest (YAML): its prompts x seeds")
    ap.add_argument("--jobs", help="JSON list of settings objects (GenerationSettings fields)")
    ap.add_argument("--prompt", action="append")
    ap.add_argument("--seed", action="append", type=int)
    ap.add_argument("--negative", dest="negative_prompt")
    ap.add_argument("--width", type=int)
    ap.add_argument("--height", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--guidance", type=float)
    ap.add_argument("--sampler")
    ap.add_argument("--precision", help="fp32 | fp16 | bf16 (what the reference computes in)")
    ap.add_argument("--rng", help="torch-cpu | torch-cuda")
    ap.add_argument("--timestep-spacing", dest="timestep_spacing", help="leading | trailing | linspace")
    ap.add_argument("--guidance-rescale", dest="guidance_rescale", type=float)
    ap.add_argument("--vae-precision", dest="vae_precision", choices=("fp32", "bf16"),
                    help="the decode's dtype whatever the precision (default: the precision's rule, as diffusers)")
    ap.add_argument("--init-image", dest="init_image",
                    help="img2img: a PNG/JPEG of exactly --width x --height (StableDiffusion(XL)Img2ImgPipeline)")
    ap.add_argument("--strength", type=float, help="img2img denoising strength in (0, 1]")
    ap.add_argument("--refiner-weights-sha256", dest="refiner_weights_sha256",
                    help="hipq's weights sha256 of the refiner (default: computed from its folder)")
    ap.add_argument("--refiner", dest="refiner_folder",
                    help="the SDXL refiner's diffusers folder (`hipq weights export`) for jobs whose settings name "
                         "a refiner: base with denoising_end, then the refiner with denoising_start")
    ap.add_argument("--refiner-switch-at", dest="refiner_switch_at", type=float,
                    help="default refiner_switch_at of the jobs (hipq's default 0.8)")
    ap.add_argument("--aesthetic-score", dest="aesthetic_score", type=float)
    ap.add_argument("--negative-aesthetic-score", dest="negative_aesthetic_score", type=float)
    ap.add_argument("--compute-precision", choices=("fp32", "fp16", "bf16"),
                    help="compute the reference in this precision whatever the job's precision, from the "
                         "initial noise the job's precision draws (torch.randn in its dtype; bf16 for fp8): "
                         "with fp32, the exact answer an fp16/bf16/fp8 job is judged against (its precision "
                         "error alone); required for fp8 jobs")
    ap.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    ap.add_argument("--no-image", action="store_true", help="latent only")
    ap.add_argument("--deterministic", action="store_true", help="torch deterministic algorithms, no TF32")
    ap.add_argument("--lora", action="append", default=[], metavar="PATH[:SCALE]",
                    help="LoRA adapter (repeatable), fused into the weights as hipq applies it: "
                         "load_lora_weights + set_adapters(weights=scales) + fuse_lora (docs/adapters.md). "
                         "The golden key carries each file's sha256 and scale; a job's own loras (a manifest's "
                         "defaults.loras, a --jobs entry's \"loras\") take precedence")
    args = ap.parse_args()
    cli_loras = [{"path": p, "scale": sc} for p, sc in (parse_lora(t) for t in args.lora)]

    import numpy as np
    import torch
    import diffusers
    import transformers
    from safetensors.numpy import save_file

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # The reference in full fp32: no TF32 shortcuts in matmul/conv.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    jobs = load_jobs(args)
    weights_sha = args.weights_sha256 or weights_sha256_of_folder(args.model)
    os.makedirs(args.out, exist_ok=True)

    with open(os.path.join(args.model, "model_index.json")) as f:
        pipeline_class_name = json.load(f)["_class_name"]
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    # The dtype a job's precision draws its noise in: fp8 jobs are bf16 jobs whose UNet
    # products run in e4m3 (docs/kernels.md, "fp8"), so they draw in bf16.
    noise_dtypes = dict(dtypes, fp8=torch.bfloat16)
    pipes = {}
    base_scheduler_config = {}
    refiners = {}  # precision -> the refiner's StableDiffusionXLImg2ImgPipeline
    refiner_scheduler_config = {}
    refiner_class = "StableDiffusionXLImg2ImgPipeline"
    commit = diffusers_commit(diffusers)
    device_name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else \
        (platform.processor() or platform.machine() or "cpu")

    digests = {}

    def digest(path):
        if path not in digests:
            digests[path] = file_sha256(path)
        return digests[path]

    for n, job in enumerate(jobs):
        if cli_loras and not job.get("loras"):
            job = dict(job, loras=cli_loras)
        s = golden_key.full_settings(job)
        r = refiner_settings(job)
        if r["refiner"] and not args.refiner_folder:
            sys.exit("make_goldens: job %d names refiner %s: give its exported folder with --refiner" %
                     (n + 1, r["refiner"]))
        if pipeline_class_name == refiner_class and not s.get("init_image"):
            sys.exit("make_goldens: %s is an SDXL refiner: it runs img2img only (give the jobs an init_image), or "
                     "as --refiner of an SDXL base" % args.model)
        loras = [(str(l["path"]), float(l.get("scale", 1.0))) for l in s["loras"]]
        # The files by content (spec/input_digests.h): the key and the "inputs" metadata.
        inputs = {"loras": [digest(p) for p, _ in loras]}
        if s["init_image"]:
            inputs["init_image"] = digest(s["init_image"])
        if r["refiner"]:
            # The refiner's weights by hipq's identity of them (`hipq weights sha256`).
            inputs["refiner_weights"] = args.refiner_weights_sha256 or weights_sha256_of_folder(args.refiner_folder)
        key = golden_key.golden_key(weights_sha, s, inputs)
        if s["precision"] == "fp8" and not args.compute_precision:
            # diffusers has no e4m3 UNet: an fp8 job's golden is the fp32 reference of its noise.
            sys.exit("make_goldens: job %d is precision fp8, which diffusers does not run: give "
                     "--compute-precision fp32 (the reference an fp8 job is judged against) or bf16" % (n + 1))
        precision = args.compute_precision or s["precision"]
        pipe_key = (precision, tuple(loras))
        if pipe_key not in pipes:
            cls = getattr(diffusers, pipeline_class_name)
            kw = {}
            if pipeline_class_name == "StableDiffusionPipeline":
                kw = {"safety_checker": None, "requires_safety_checker": False}
            pipes[pipe_key] = cls.from_pretrained(args.model, torch_dtype=dtypes[precision], **kw).to(device)
            pipes[pipe_key].set_progress_bar_config(disable=True)
            if loras:
                fuse_loras(pipes[pipe_key], loras)
            base_scheduler_config[pipe_key] = pipes[pipe_key].scheduler.config
        pipe = pipes[pipe_key]
        # Always from the folder's config, never from the previous job's scheduler.
        pipe.scheduler = make_scheduler(base_scheduler_config[pipe_key], s["sampler"], s["timestep_spacing"])
        gen_device = "cpu" if s["rng"] == "torch-cpu" else "cuda"
        generator = torch.Generator(gen_device).manual_seed(int(s["seed"]))
        h, w = int(s["height"]), int(s["width"])
        latents_in = None
        if precision != s["precision"] and not s.get("init_image"):
            # The job's initial noise as diffusers draws it at the job's precision (randn_tensor:
            # on the generator's device, in the pipeline dtype), then computed in `precision`.
            # Not for img2img: its pipeline draws the encoder's sample and the added noise from the
            # generator itself (img2img_noise_drawn_in), and a draw here would advance it first.
            shape = (1, pipe.unet.config.in_channels, h // pipe.vae_scale_factor, w // pipe.vae_scale_factor)
            latents_in = torch.randn(shape, generator=generator, device=gen_device,
                                     dtype=noise_dtypes[s["precision"]]).to(device=device, dtype=dtypes[precision])
        init_image = None
        if s.get("init_image"):
            # img2img (docs/pipeline.md, "img2img"): the init image as diffusers' load_image gives it
            # (PIL, convert("RGB")), of exactly the job's size: hipq never resizes.
            if precision != s["precision"] and pipeline_class_name == "StableDiffusionPipeline":
                # SD 2.x encodes the init image in the pipeline's dtype, so the encoder's own draw
                # (latent_dist.sample) would differ between the job and the reference.
                sys.exit("make_goldens: SD img2img goldens compute in the job's own precision (no --compute-precision)")
            from diffusers.utils import load_image
            init_image = load_image(s["init_image"])
            if init_image.size != (w, h):
                sys.exit("make_goldens: %s is %dx%d, the job %dx%d: hipq refuses it, so no golden" %
                         ((s["init_image"],) + init_image.size + (w, h)))
            i2i_class = {"StableDiffusionXLPipeline": "StableDiffusionXLImg2ImgPipeline",
                         refiner_class: refiner_class,
                         "StableDiffusionPipeline": "StableDiffusionImg2ImgPipeline"}[pipeline_class_name]
            # The same modules (weights shared), the job's scheduler. The refiner's folder loads as its
            # img2img pipeline already, with its config (requires_aesthetics_score, force_zeros_for_empty_prompt
            # false), which a pipeline made from its components would lose.
            run = pipe if pipeline_class_name == refiner_class else getattr(diffusers, i2i_class)(**pipe.components)
            # hipq encodes the init image whole (no tiled_encode); a previous job's decode may have
            # left tiling on.
            run.vae.disable_tiling()
            run.set_progress_bar_config(disable=True)
            # strength as the user wrote it: int(steps * strength) in Python's doubles, as hipq computes it.
            extra = {"image": init_image, "strength": float(s.get("strength", 1.0))}
            if pipeline_class_name == refiner_class:
                # The refiner itself as the img2img model: its aesthetic-score conditioning.
                extra.update(aesthetic_kwargs(r))
        else:
            run = pipe
            extra = {"latents": latents_in, "height": h, "width": w}
        decoder = pipe
        if r["refiner"]:
            # Base + refiner: diffusers' ensemble of experts on the same generator object.
            if precision not in refiners:
                refiners[precision] = getattr(diffusers, refiner_class).from_pretrained(
                    args.refiner_folder, torch_dtype=dtypes[precision]).to(device)
                refiners[precision].set_progress_bar_config(disable=True)
                refiner_scheduler_config[precision] = refiners[precision].scheduler.config
            decoder = refiners[precision]
            decoder.scheduler = make_scheduler(refiner_scheduler_config[precision], s["sampler"], s["timestep_spacing"])
            # refiner_switch_at as the user wrote it (hipq reads the float's "%.6g" decimal).
            switch = float(golden_key.format_guidance(r["refiner_switch_at"]))
            extra["denoising_end"] = switch
        common_kw = dict(negative_prompt=s["negative_prompt"] or None,  # hipq's "" = diffusers' None
                         num_inference_steps=int(s["steps"]),
                         guidance_scale=float(golden_key.as_float32(s["guidance"])),
                         guidance_rescale=float(golden_key.as_float32(s["guidance_rescale"])),
                         generator=generator, output_type="latent")
        t0 = time.time()
        with torch.no_grad(), img2img_noise_drawn_in(run, noise_dtypes.get(s["precision"], dtypes[precision]), init_image is not None):
            latents = run(prompt=s["prompt"], **common_kw, **extra).images
            if r["refiner"]:
                latents = decoder(prompt=s["prompt"], image=latents, denoising_start=switch, **common_kw,
                                  **aesthetic_kwargs(r)).images
            image_u8 = None
            if not args.no_image:
                # A base + refiner job decodes with the refiner's VAE, as hipq does.
                vae = decoder.vae
                if (h // 8) * (w // 8) > VAE_TILE_ABOVE_LATENT_PIXELS:
                    vae.enable_tiling()
                else:
                    vae.disable_tiling()
                restore = None
                if s["vae_precision"]:
                    # The job's own decode dtype (vae_precision), whatever the precision: the VAE
                    # cast to it with diffusers' upcast off (no force_upcast back to fp32).
                    want = dtypes[str(s["vae_precision"])]
                    if vae.dtype != want:
                        restore = vae.dtype
                        vae.to(want)
                else:
                    # As the pipelines decode: fp32 VAE when it would overflow in fp16.
                    needs_upcast = vae.dtype == torch.float16 and vae.config.force_upcast
                    if pipeline_class_name in ("StableDiffusionXLPipeline", refiner_class) and vae.dtype != torch.float32:
                        needs_upcast = True  # hipq runs SDXL's VAE in fp32 whatever the precision
                    if needs_upcast:
                        restore = vae.dtype
                        vae.to(torch.float32)
                z = latents.to(vae.dtype) / vae.config.scaling_factor
                image = vae.decode(z, return_dict=False)[0]
                image = decoder.image_processor.postprocess(image, output_type="np")  # [1, H, W, 3] in [0, 1]
                image_u8 = (image * 255).round().astype("uint8")[0]  # numpy_to_pil's rounding
                if restore is not None:
                    vae.to(restore)
        elapsed = time.time() - t0

        latent = np.ascontiguousarray(latents.detach().float().cpu().numpy().astype("<f4"))
        tensors = {"latent": latent}
        content = hashlib.sha256(latent.tobytes())
        if image_u8 is not None:
            image_u8 = np.ascontiguousarray(image_u8)
            tensors["image"] = image_u8
            content.update(image_u8.tobytes())
        created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        provenance = {
            "reference": "diffusers",
            "reference_version": diffusers.__version__,
            "reference_commit": commit,
            "torch_version": torch.__version__,
            "device": device_name,
            "precision": precision,
            "pipeline_class": type(run).__name__ + ("+" + type(decoder).__name__ if r["refiner"] else ""),
            "scheduler_class": type(pipe.scheduler).__name__,
            "created_at": created,
            "source": "tools/golden/make_goldens.py " + " ".join(sys.argv[1:]),
            "extra": {
                "loras": [{"name": os.path.splitext(os.path.basename(p))[0], "scale": sc, "sha256": digest(p)}
                          for p, sc in loras],
                "transformers_version": transformers.__version__,
                "python_version": platform.python_version(),
                "cuda_version": torch.version.cuda or "",
                "tf32": False,
                "seconds": round(elapsed, 3),
                "noise_dtype": s["precision"],
                "refiner": ({"folder": args.refiner_folder, "model": r["refiner"],
                             "refiner_switch_at": r["refiner_switch_at"],
                             "scheduler_class": type(decoder.scheduler).__name__}
                            if r["refiner"] else None),
                "aesthetic_score": r["aesthetic_score"] if (r["refiner"] or pipeline_class_name == refiner_class)
                else None,
                "negative_aesthetic_score": r["negative_aesthetic_score"]
                if (r["refiner"] or pipeline_class_name == refiner_class) else None,
            },
        }
        dumps = lambda o: json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # noqa: E731
        metadata = {
            "format": GOLDEN_FORMAT,
            "key": key,
            "key_material": golden_key.key_material(weights_sha, s, inputs),
            "model": args.model_name or args.model,
            "weights_sha256": weights_sha,
            "settings": golden_key.settings_json(s),
            "scheduler_config": dumps(jsonable(pipe.scheduler.config)),
            "provenance": dumps(provenance),
            "content_sha256": content.hexdigest(),
            "created_at": created,
        }
        if golden_key.inputs_json(inputs):
            metadata["inputs"] = golden_key.inputs_json(inputs)
        path = os.path.join(args.out, key + ".safetensors")
        tmp = path + ".tmp"
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, path)
        print("%d/%d %s seed %s %dx%d %s steps %s: %s (%.2f s)" % (n + 1, len(jobs), s["prompt"][:40], s["seed"],
                                                                   w, h, s["steps"], s["sampler"], path, elapsed),
              flush=True)


if __name__ == "__main__":
    main()
