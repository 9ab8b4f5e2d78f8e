#!/usr/bin/env python3
"""Golden keys, computed exactly as hipq's C++ does (spec/golden_format.h).

The key of a golden is the lower-case hex sha256 of a canonical JSON text of
everything that determines the output: the weights' sha256 and the generation
settings (precision only when it is not fp32). The canonical text is
json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
encoded as UTF-8, where obj is

  {"guidance": "%.6g" % float32(guidance), "height": int, "key_version": 1,
   "negative_prompt": str, "prompt": str, "rng": str, "sampler": str,
   "seed": int, "steps": int, "weights_sha256": str, "width": int}

plus "precision": "fp16" | "bf16" when the precision is not fp32.

See docs/golden-format.md. Standard library only, so it runs anywhere.

Command line (for checks): golden_key.py WEIGHTS_SHA256 SETTINGS_JSON
prints the canonical text on the first line and the key on the second.
"""
import hashlib
import json
import struct
import sys

KEY_VERSION = 1

DEFAULTS = {
    "prompt": "",
    "negative_prompt": "",
    "seed": 0,
    "width": 1024,
    "height": 1024,
    "steps": 30,
    "guidance": 5.0,
    "sampler": "euler",
    "precision": "fp32",
    "rng": "torch-cpu",
    "timestep_spacing": "",
    "guidance_rescale": 0.0,
}


def as_float32(x):
    """Rounds a Python float to the nearest float32, as the C++ struct holds it."""
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def format_guidance(guidance):
    return "%.6g" % as_float32(guidance)


def full_settings(settings):
    """Settings with hipq's defaults filled in (same defaults as GenerationSettings)."""
    out = dict(DEFAULTS)
    out.update({k: v for k, v in settings.items() if v is not None})
    return out


def key_material(weights_sha256, settings):
    s = full_settings(settings)
    obj = {
        "key_version": KEY_VERSION,
        "weights_sha256": str(weights_sha256),
        "prompt": str(s["prompt"]),
        "negative_prompt": str(s["negative_prompt"]),
        "seed": int(s["seed"]),
        "width": int(s["width"]),
        "height": int(s["height"]),
        "steps": int(s["steps"]),
        "guidance": format_guidance(s["guidance"]),
        "sampler": str(s["sampler"]),
        "rng": str(s["rng"]),
    }
    # diffusers draws the initial noise in the pipeline's dtype: another image at
    # fp16/bf16 for the same seed, so those precisions are in the key (fp32 keys
    # have no "precision" member, as before).
    if str(s["precision"]) != "fp32":
        obj["precision"] = str(s["precision"])
    # The schedule options: only when set (keys of jobs without them unchanged).
    if str(s["timestep_spacing"]):
        obj["timestep_spacing"] = str(s["timestep_spacing"])
    if as_float32(s["guidance_rescale"]) != 0.0:
        obj["guidance_rescale"] = format_guidance(s["guidance_rescale"])
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def golden_key(weights_sha256, settings):
    return hashlib.sha256(key_material(weights_sha256, settings).encode("utf-8")).hexdigest()


def settings_json(settings):
    """The "settings" metadata entry: GenerationSettings JSON, canonical."""
    s = full_settings(settings)
    obj = {
        "prompt": str(s["prompt"]),
        "negative_prompt": str(s["negative_prompt"]),
        "seed": int(s["seed"]),
        "width": int(s["width"]),
        "height": int(s["height"]),
        "steps": int(s["steps"]),
        "guidance": float(format_guidance(s["guidance"])),
        "sampler": str(s["sampler"]),
        "precision": str(s["precision"]),
        "rng": str(s["rng"]),
    }
    # diffusers draws the initial noise in the pipeline's dtype: another image at
    # fp16/bf16 for the same seed, so those precisions are in the key (fp32 keys
    # have no "precision" member, as before).
    if str(s["precision"]) != "fp32":
        obj["precision"] = str(s["precision"])
    if str(s["timestep_spacing"]):
        obj["timestep_spacing"] = str(s["timestep_spacing"])
    if as_float32(s["guidance_rescale"]) != 0.0:
        obj["guidance_rescale"] = float(format_guidance(s["guidance_rescale"]))
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: golden_key.py WEIGHTS_SHA256 SETTINGS_JSON\n")
        return 2
    settings = json.loads(argv[2])
    sys.stdout.write(key_material(argv[1], settings) + "\n" + golden_key(argv[1], settings) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
