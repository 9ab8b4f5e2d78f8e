#!/usr/bin/env python3
"""Agreement of two sets of final latents and decoded images, matched by their generation inputs.

Each set is a directory searched recursively for *.safetensors files with a
"latent" tensor and a "settings" JSON in their metadata: hipq's
latent.safetensors outputs and golden files both qualify (docs/golden-format.md,
docs/pipeline.md). Files are matched on prompt, negative prompt, seed, size,
steps, guidance and sampler; the precision is left out on purpose, so an fp16
run can be set against an fp32 reference of the same inputs. Prints one line
per match (cosine, max abs, relative L2 of the latent; PSNR of the RGB8 images, in
fp64, when both sides have one: a golden's "image" tensor, or the image.png beside
a hipq latent.safetensors) and the worst of each over all matches.

Usage: latent_agreement.py A_DIR B_DIR [--label-a NAME] [--label-b NAME]
Exit status 1 when nothing matched.
"""
import argparse
import json
import os
import sys

MATCH_FIELDS = ("prompt", "negative_prompt", "seed", "width", "height", "steps", "guidance", "sampler", "rng")


def image_of(path, f):
    """The RGB8 image of a latent file: the golden's tensor, or hipq's image.png beside it."""
    if "image" in f.keys():
        return f.get_tensor("image")
    png = os.path.join(os.path.dirname(path), "image.png")
    if os.path.exists(png):
        import numpy as np
        from PIL import Image
        return np.asarray(Image.open(png).convert("RGB"))
    return None


def psnr(x, y):
    import numpy as np
    d = x.astype(np.float64) - y.astype(np.float64)
    mse = float(np.mean(d * d))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0 * 255.0 / mse)


def latents(root):
    from safetensors import safe_open
    out = {}
    for d, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".safetensors"):
                continue
            path = os.path.join(d, name)
            with safe_open(path, framework="numpy") as f:
                meta = f.metadata() or {}
                if "latent" not in f.keys() or "settings" not in meta:
                    continue
                s = json.loads(meta["settings"])
                key = tuple(str(s.get(k, "")) for k in MATCH_FIELDS)
                out.setdefault(key, []).append((path, s.get("precision", "?"), f.get_tensor("latent"),
                                                image_of(path, f)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--label-a", default="A")
    ap.add_argument("--label-b", default="B")
    args = ap.parse_args()
    import numpy as np

    a, b = latents(args.a), latents(args.b)
    worst = None
    n = 0
    print("%-44s %5s %-4s %-4s %12s %10s %10s %9s" % ("prompt", "seed", args.label_a[:4], args.label_b[:4], "cosine",
                                                      "max_abs", "rel_l2", "psnr_dB"))
    worst_psnr = None
    for key in sorted(a):
        if key not in b:
            continue
        _, pb, lb, ib = b[key][0]
        y = lb.astype(np.float64).ravel()
        for _, pa, la, ia in a[key]:
            x = la.astype(np.float64).ravel()
            if x.shape != y.shape:
                print("%s: shapes differ %s vs %s" % (key[0][:40], la.shape, lb.shape))
                continue
            cos = float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))
            max_abs = float(np.max(np.abs(x - y)))
            rel = float(np.linalg.norm(x - y) / np.linalg.norm(y))
            p = psnr(ia, ib) if ia is not None and ib is not None and ia.shape == ib.shape else None
            if p is not None:
                worst_psnr = p if worst_psnr is None else min(worst_psnr, p)
            print("%-44s %5s %-4s %-4s %12.9f %10.3g %10.3g %9s" % (key[0][:44], key[2], pa, pb, cos, max_abs, rel,
                                                                    "-" if p is None else "%.2f" % p))
            n += 1
            worst = (cos, max_abs, rel) if worst is None else (min(worst[0], cos), max(worst[1], max_abs),
                                                                 max(worst[2], rel))
    if not n:
        print("latent_agreement: no latent in %s matches one in %s" % (args.a, args.b), file=sys.stderr)
        return 1
    print("%s vs %s: %d pair(s), worst cosine %.9f (1-cos %.3g), max abs %.3g, rel L2 %.3g, image psnr %s"
          % (args.label_a, args.label_b, n, worst[0], 1 - worst[0], worst[1], worst[2],
             "-" if worst_psnr is None else "%.2f dB" % worst_psnr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
