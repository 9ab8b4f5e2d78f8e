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

plus "precision": "fp16" | "bf16" when the precision is not fp32, and, only
when set: "timestep_spacing", "guidance_rescale", "vae_precision" (the
decode's dtype: "fp32" | "bf16"); the files a job names besides
the model, by content (their sha256 in INPUTS, never their paths):
"loras": [{"scale": "%.6g", "sha256": ...}] in order, "init_image_sha256" with
"strength", "refiner": {"aesthetic_score", "negative_aesthetic_score",
"switch_at" (each "%.6g"), "weights_sha256"}.

INPUTS is the golden's "inputs" metadata (spec/input_digests.h):
{"loras": [sha256, ...], "init_image": sha256, "refiner_weights": sha256}.

See docs/golden-format.md. Standard library only, so it runs anywhere.

Command line (for checks): golden_key.py WEIGHTS_SHA256 SETTINGS_JSON [INPUTS_JSON]
prints the canonical text on the first line and the key on the second.
"""
import hashlib
import json
import struct
import sys

KEY_VERSION = 1

# The key covers init images (sha256 + strength), LoRAs and the refiner.
COVERS_INIT_IMAGE = True
COVERS_LORA = True
COVERS_REFINER = True

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
    "init_image": "",
    "strength": 1.0,
    "loras": [],
    "refiner": "",
    "refiner_switch_at": 0.8,
    "aesthetic_score": 6.0,
    "negative_aesthetic_score": 2.5,
    "vae_precision": "",
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


def key_material(weights_sha256, settings, inputs=None):
    s = full_settings(settings)
    inputs = inputs or {}
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
    # The decode's dtype changes the image: only when set (every other key unchanged).
    if str(s["vae_precision"]):
        obj["vae_precision"] = str(s["vae_precision"])
    # Files by content, never by path.
    if s["loras"]:
        digests = list(inputs.get("loras", []))
        obj["loras"] = [{"sha256": str(digests[i]) if i < len(digests) else "",
                         "scale": format_guidance(lora.get("scale", 1.0))}
                        for i, lora in enumerate(s["loras"])]
    if str(s["init_image"]):
        obj["init_image_sha256"] = str(inputs.get("init_image", ""))
        obj["strength"] = format_guidance(s["strength"])
    if str(s["refiner"]):
        obj["refiner"] = {
            "weights_sha256": str(inputs.get("refiner_weights", "")),
            "switch_at": format_guidance(s["refiner_switch_at"]),
            "aesthetic_score": format_guidance(s["aesthetic_score"]),
            "negative_aesthetic_score": format_guidance(s["negative_aesthetic_score"]),
        }
    elif (as_float32(s["aesthetic_score"]) != as_float32(DEFAULTS["aesthetic_score"])
          or as_float32(s["negative_aesthetic_score"]) != as_float32(DEFAULTS["negative_aesthetic_score"])):
        # A refiner run as the img2img model conditions on the scores itself.
        obj["aesthetic_score"] = format_guidance(s["aesthetic_score"])
        obj["negative_aesthetic_score"] = format_guidance(s["negative_aesthetic_score"])
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def golden_key(weights_sha256, settings, inputs=None):
    return hashlib.sha256(key_material(weights_sha256, settings, inputs).encode("utf-8")).hexdigest()


def inputs_json(inputs):
    """The "inputs" metadata entry (spec/input_digests.h), canonical; None when empty."""
    obj = {k: v for k, v in (inputs or {}).items() if v}
    if not obj:
        return None
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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
    # As GenerationSettings::to_json writes them: only when set.
    if str(s["init_image"]):
        obj["init_image"] = str(s["init_image"])
    if as_float32(s["strength"]) != 1.0:
        obj["strength"] = float(format_guidance(s["strength"]))
    if s["loras"]:
        obj["loras"] = [{"path": str(l["path"]), "scale": as_float32(l.get("scale", 1.0))} for l in s["loras"]]
    if str(s["refiner"]):
        obj["refiner"] = str(s["refiner"])
        obj["refiner_switch_at"] = float(format_guidance(s["refiner_switch_at"]))
    # The scores travel with a refiner, or alone when not the defaults (the
    # refiner as the img2img model conditions on them).
    if str(s["refiner"]) or any(as_float32(s[k]) != as_float32(DEFAULTS[k])
                                for k in ("aesthetic_score", "negative_aesthetic_score")):
        for k in ("aesthetic_score", "negative_aesthetic_score"):
            obj[k] = float(format_guidance(s[k]))
    if str(s["vae_precision"]):
        obj["vae_precision"] = str(s["vae_precision"])
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write("usage: golden_key.py WEIGHTS_SHA256 SETTINGS_JSON [INPUTS_JSON]\n"
                         "prints the key material, the key and the settings as a golden stores them\n")
        return 2
    settings = json.loads(argv[2])
    inputs = json.loads(argv[3]) if len(argv) == 4 else None
    sys.stdout.write(key_material(argv[1], settings, inputs) + "\n" + golden_key(argv[1], settings, inputs) + "\n" +
                     settings_json(settings) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
