#!/usr/bin/env bash
# hipq at MLPerf Inference's SDXL setting on one GPU, beside a diffusers loop in the same call.
#
#   tools/bench/mlperf_setting.sh HIPQ_BINARY OUTDIR
#
# MLPerf's text-to-image setting (SDXL 1.0 base): 1024 x 1024, Euler, 20 steps, guidance 8,
# its fixed negative prompt. Here on the synthetic SDXL architecture (`hipq weights export
# synthetic:sdxl`: same shapes, so the same time; no FID/CLIP, which need the real weights
# and COCO), the first IMAGES PartiPrompts, seed 0 each:
# 1. for each precision of PRECISIONS, `hipq run` of the batch (coordinator + one worker;
#    latent and PNG written, each result recorded; no golden, so parity says NO_GOLDEN):
#    images/s over the whole run (wall, model load included) and warm (the images after the
#    first over the time after the first finished, from the jobs' own timings), and
#    `hipq stats`' per-phase table;
# 2. diffusers' StableDiffusionXLPipeline at fp16 on the same weights and prompts
#    (tools/bench/diffusers_memory.py): seconds per warm image.
# Prints one table (also OUTDIR/mlperf.md). MLPerf's own figure to set beside it
# (v5.0 closed, 8 x H200, TensorRT, FP8 UNet): 18.99 samples/s offline = 2.37 per GPU.
# With BATCHES (e.g. "1 4"), each precision runs once per batch size (`hipq run --batch N`: the
# worker runs N jobs as one UNet batch, docs/batching.md) and every latent of a batched run is
# compared, byte for byte, with the same job's latent of the batch-1 run (latents.txt).
# EXTRA_DEFAULTS (YAML flow entries added to the manifest's defaults, e.g. "vae_precision: bf16")
# with TAG (a suffix of every run's name) measures a variant beside the plain runs of the same WORKDIR.
# Env: PRECISIONS ("fp8 fp16"), BATCHES ("1"), IMAGES (16), WORKDIR (/tmp/hipq-sdxl), EXPORT_DTYPE (f16),
# PEER (fp16; empty: no diffusers run), REFERENCE_SRC (a diffusers src/ when not installed),
# SYNTHETIC (sdxl; tiny-sdxl with BACKEND=cpu SIZE=64 PEER= for a dry run on a CPU box),
# SIZE (1024), BACKEND (hip).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
hipq="$(realpath "${1:?usage: mlperf_setting.sh HIPQ_BINARY OUTDIR}")"
out="$(mkdir -p "${2:?usage: mlperf_setting.sh HIPQ_BINARY OUTDIR}" && realpath "$2")"
precisions="${PRECISIONS:-fp8 fp16}"; batches="${BATCHES:-1}"; images="${IMAGES:-16}"; work="${WORKDIR:-/tmp/hipq-sdxl}"
export_dtype="${EXPORT_DTYPE:-f16}"; peer="${PEER-fp16}"
synthetic="${SYNTHETIC:-sdxl}"; size="${SIZE:-1024}"; backend="${BACKEND:-hip}"
negative="normal quality, low quality, worst quality, low res, blurry, nsfw, nude"
if [[ -n "${REFERENCE_SRC:-}" ]]; then
  PYTHONPATH="$(realpath "$REFERENCE_SRC")${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
stamp() { echo "[$(date +%H:%M:%S)] $*"; }
mkdir -p "$work"
model="$work/$synthetic"
if [[ ! -f "$model/model_index.json" ]]; then
  stamp "exporting synthetic:$synthetic to $model"
  "$hipq" weights export "synthetic:$synthetic" --out "$model" --dtype "$export_dtype" > "$out/export.log" 2>&1 \
    || { cat "$out/export.log"; exit 1; }
fi
echo "program | precision | images | run wall s | images/s (whole run) | images/s (warm) | s / warm image (compute)" \
  > "$out/rows.txt"
for p in $precisions; do
 for b in $batches; do
  tag="$p"; [[ "$b" == 1 ]] || tag="$p-batch$b"
  tag="$tag${TAG:+-$TAG}"
  dir="$work/mlperf-$tag"; db="$out/$tag.db"
  rm -rf "$dir" "$db" "$db"-wal "$db"-shm
  cat > "$out/manifest-$tag.yaml" <<YAML
batch: mlperf-setting-$tag
model: $model
defaults: {width: $size, height: $size, steps: 20, guidance: 8.0, sampler: euler, precision: $p,
           negative_prompt: "$negative", ${EXTRA_DEFAULTS:+$EXTRA_DEFAULTS, }seeds: [0]}
outputs: {directory: $dir, save: [latent, png, timings], layout: "{prompt:03}-s{seed}"}
prompts_file: {path: $root/data/prompts/PartiPrompts.tsv, limit: $images}
YAML
  stamp "hipq $tag: $images images"
  t0=$(date +%s.%N)
  "$hipq" run "$out/manifest-$tag.yaml" --db "$db" --backend "$backend" --batch "$b" > "$out/run-$tag.log" 2>&1 \
    || echo "hipq run $tag exited with $? (see run-$tag.log)"
  t1=$(date +%s.%N)
  tail -n 3 "$out/run-$tag.log"
  "$hipq" stats --db "$db" > "$out/stats-$tag.txt" 2>&1 || true
  python3 - "$dir" "$tag" "$t0" "$t1" >> "$out/rows.txt" <<'PY'
import glob, json, os, sys
d, p, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
runs = []
for f in glob.glob(d + "/**/timings.json", recursive=True):
    t = json.load(open(f))
    # A batched job's denoise is its batch's: its share is the denoise over the jobs that shared it.
    share = max(1, t.get("denoise", {}).get("batch_jobs", 1))
    compute = sum((x["gpu_ms"] or x["host_ms"]) / (share if x["phase"] == "denoise" else 1)
                  for x in t["phases"] if x["phase"] in ("text_encode", "denoise", "decode"))
    runs.append((os.path.getmtime(f), t.get("warm"), compute, share))
runs.sort()
n = len(runs)
if n == 0:
    print(f"hipq | {p} | 0 | {t1 - t0:.1f} | - | - | -")
    sys.exit()
warm = [r for r in runs if r[1]]
# Warm throughput: the images after the first batch, over the time from its end to the last's.
first = runs[0][3]
span = runs[-1][0] - runs[first - 1][0] if n > first else 0
warm_rate = f"{(n - first) / span:.3f}" if span > 0 else "-"
per = sorted(r[2] for r in warm)
per_s = f"{per[len(per) // 2] / 1000:.3f}" if per else "-"
print(f"hipq | {p} | {n} | {t1 - t0:.1f} | {n / (t1 - t0):.3f} | {warm_rate} | {per_s}")
PY
  tail -n 1 "$out/rows.txt"
  if [[ "$b" != 1 && -z "${TAG:-}" && -d "$work/mlperf-$p" ]]; then
    same=0; total=0
    for f in "$dir"/*/latent.safetensors; do
      total=$((total + 1))
      cmp -s "$f" "$work/mlperf-$p/$(basename "$(dirname "$f")")/latent.safetensors" && same=$((same + 1))
    done
    echo "$tag: $same of $total latents byte-identical to the batch-1 run's" | tee -a "$out/latents.txt"
  fi
 done
done
if [[ -n "$peer" ]]; then
  stamp "diffusers $peer: $images images"
  python3 "$root/tools/bench/diffusers_memory.py" "$model" --precision "$peer" --images "$images" --size "$size" --steps 20 \
    --guidance 8 --negative-prompt "$negative" --prompts-tsv "$root/data/prompts/PartiPrompts.tsv" \
    > "$out/diffusers-$peer.json" 2> "$out/diffusers-$peer.log" || tail -n 20 "$out/diffusers-$peer.log"
  python3 - "$out/diffusers-$peer.json" "$peer" "$images" >> "$out/rows.txt" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception:
    print(f"diffusers | {sys.argv[2]} | {sys.argv[3]} | (failed) | | |")
    sys.exit()
s = sorted(r["seconds_per_image"][1:] or r["seconds_per_image"])
print(f"{r['peer']} | {sys.argv[2]} | {r['images']} | {sum(r['seconds_per_image']):.1f} | "
      f"{len(r['seconds_per_image']) / sum(r['seconds_per_image']):.3f} | {1 / s[len(s) // 2]:.3f} | {s[len(s) // 2]:.3f}")
PY
  tail -n 1 "$out/rows.txt"
fi
{ echo "| $(head -1 "$out/rows.txt") |"; echo "|---|---|---:|---:|---:|---:|---:|"
  tail -n +2 "$out/rows.txt" | sed 's/^/| /; s/$/ |/'; } > "$out/mlperf.md"
echo "MLPerf Inference v5.0 closed, 8 x H200 (TensorRT, FP8): 2.37 images/s per GPU"
cat "$out/mlperf.md"
