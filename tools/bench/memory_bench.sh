#!/usr/bin/env bash
# hipq's device memory in each placement beside diffusers' whole SDXL pipeline,
# one GPU, one call (docs/memory.md; rows in docs/benchmarks.md).
#
#   tools/bench/memory_bench.sh HIPQ_BINARY OUTDIR
#
# 1. `hipq weights export synthetic:sdxl` into WORKDIR (skipped when present; the
#    folder sdxl_parity.sh uses too).
# 2. For each case of CASES (NAME:PRECISION:hipq run flags, ',' between flags),
#    `hipq run` of IMAGES jobs (SIZE px, STEPS Euler steps) while nvidia-smi samples
#    the device's used memory every 100 ms; then each job's allocator peak, plan,
#    placement and phase times from its timings.json.
# 3. diffusers' pipeline (tools/bench/diffusers_memory.py) at each precision of
#    PEER_PRECISIONS, sampled the same way.
# 4. Each case that is not standard-PRECISION against standard-PRECISION when both
#    ran: the PSNR of its PNGs against the standard case's of the same prompt and
#    seed (python3 with numpy and PIL; the fp16/bf16 image gate is 35 dB).
# Prints one table (also OUTDIR/memory.md): allocator peak, the device's used
# memory less what it used before the program started, seconds per warm image;
# then the PSNR lines (also OUTDIR/psnr.txt).
# Env: WORKDIR (/tmp/hipq-sdxl-parity), IMAGES (4), SIZE (1024), STEPS (30),
# PEER_PRECISIONS ("fp16 fp32"), REFERENCE_SRC (diffusers' src/ when not installed),
# EXPORT_DTYPE (f32).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
hipq="$(realpath "${1:?usage: memory_bench.sh HIPQ_BINARY OUTDIR}")"
out="$(mkdir -p "${2:?usage: memory_bench.sh HIPQ_BINARY OUTDIR}" && realpath "$2")"
work="${WORKDIR:-/tmp/hipq-sdxl-parity}"; images="${IMAGES:-4}"; size="${SIZE:-1024}"; steps="${STEPS:-30}"
peer_precisions="${PEER_PRECISIONS:-fp16 fp32}"; export_dtype="${EXPORT_DTYPE:-f32}"
cases="${CASES:-standard-fp16:fp16:--placement,standard low-8GiB-fp16:fp16:--device-memory-limit,8GiB \
low-6GiB-fp16:fp16:--device-memory-limit,6GiB standard-bf16:bf16:--placement,standard \
standard-fp32:fp32:--placement,standard}"
if [[ -n "${REFERENCE_SRC:-}" ]]; then
  PYTHONPATH="$(realpath "$REFERENCE_SRC")${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
stamp() { echo "[$(date +%H:%M:%S)] $*"; }
mkdir -p "$work"
model="$work/sdxl"
if [[ ! -f "$model/model_index.json" ]]; then
  stamp "exporting synthetic:sdxl to $model"
  "$hipq" weights export synthetic:sdxl --out "$model" --dtype "$export_dtype" > "$out/export.log" 2>&1 \
    || { cat "$out/export.log"; exit 1; }
fi
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1; }
sampler_pid=""
start_sampling() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 > "$1" & sampler_pid=$!; }
stop_sampling() { kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; }
max_of() { sort -n "$1" | tail -1; }
echo "case | program | precision | placement | allocator peak GiB | device used GiB (sampled max - idle) | s / warm image" \
  > "$out/rows.txt"

for c in $cases; do
  name="${c%%:*}"; rest="${c#*:}"; precision="${rest%%:*}"; flags="${rest#*:}"; flags="${flags//,/ }"
  dir="$work/mem-$name"; db="$out/$name.db"
  rm -rf "$dir" "$db" "$db"-wal "$db"-shm
  seeds=$(seq -s, 0 $((images - 1)))
  cat > "$out/manifest-$name.yaml" <<YAML
batch: memory-$name
model: $model
defaults: {width: $size, height: $size, steps: $steps, guidance: 5.0, sampler: euler, precision: $precision,
           seeds: [$seeds]}
outputs: {directory: $dir, save: [latent, png, timings]}
prompts:
  - a photograph of an astronaut riding a horse
YAML
  idle=$(used_mib)
  start_sampling "$out/smi-$name.txt"
  stamp "hipq $name: run $flags"
  # shellcheck disable=SC2086  # flags are words on purpose
  "$hipq" run "$out/manifest-$name.yaml" --db "$db" --backend hip $flags > "$out/run-$name.log" 2>&1 \
    || echo "hipq run $name exited with $?"
  stop_sampling
  tail -n 12 "$out/run-$name.log"
  top=$(max_of "$out/smi-$name.txt")
  python3 - "$dir" "$name" "$precision" "$idle" "$top" >> "$out/rows.txt" <<'PY'
import glob, json, sys
d, name, precision, idle, top = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5] or 0)
t = [json.load(open(f)) for f in sorted(glob.glob(d + "/**/timings.json", recursive=True))]
if not t:
    print(f"{name} | hipq | {precision} | (no job finished: see run-{name}.log) | | {(top - idle) / 1024:.2f} |")
    sys.exit()
peak = max(x["peak_memory_bytes"] for x in t) / 2**30
plan = t[0].get("memory_plan", {})
# Each plan the jobs took, in order, with its jobs' decode times (the first job of a worker may
# plan under a larger runtime reading than the later ones).
def describe(p):
    return p.get("placement", "?") + (f", VAE tiles {p['vae_tile']} px" if p.get("vae_tile") else "") + \
        (f", VAE in {p['vae_dtype']}" if p.get("vae_dtype") else "") + f" (plan {p.get('peak_bytes', 0) / 2**30:.2f} GiB)"
groups = {}
for x in t:
    ms = [p["gpu_ms"] or p["host_ms"] for p in x["phases"] if p["phase"] == "decode"]
    groups.setdefault(describe(x.get("memory_plan", {})), []).append(ms[0] if ms else 0)
place = "; ".join(f"{k}: {len(v)} job(s), decode {sorted(v)[len(v) // 2]:.0f} ms" for k, v in groups.items())
warm = [sum(p["gpu_ms"] or p["host_ms"] for p in x["phases"] if p["phase"] in ("text_encode", "denoise", "decode"))
        for x in t if x.get("warm")]
per = f"{sorted(warm)[len(warm) // 2] / 1000:.3f}" if warm else "-"
print(f"{name} | hipq | {precision} | {place} | {peak:.2f} | "
      f"{(top - idle) / 1024:.2f} | {per}")
# Each phase's allocator peak against the moment of that phase in the same job's own plan
# (a worker's jobs may plan differently: the first under a larger runtime reading); the job
# whose peak came closest to (or over) its moment is shown.
cells = []
for ph in ("text_encode", "image_encode", "denoise", "decode"):
    seen = [(x["phase_peak_bytes"][ph], x.get("memory_plan", {}).get(ph + "_bytes", 0))
            for x in t if ph in x.get("phase_peak_bytes", {})]
    if seen:
        got, planned = max(seen, key=lambda v: v[0] - v[1])
        cells.append(f"{ph} {got / 2**30:.3f} / {planned / 2**30:.3f}")
with open(d + "/../phases-" + name + ".txt", "w") as f:
    f.write(f"{name}: measured / planned GiB (the job nearest its plan): " + ", ".join(cells) + "\n")
PY
  tail -n 1 "$out/rows.txt"
  tee -a "$out/phases.md" < "$dir/../phases-$name.txt" 2>/dev/null || true
done

for p in $peer_precisions; do
  idle=$(used_mib)
  start_sampling "$out/smi-diffusers-$p.txt"
  stamp "diffusers $p"
  python3 "$root/tools/bench/diffusers_memory.py" "$model" --precision "$p" --images "$images" --size "$size" \
    --steps "$steps" > "$out/diffusers-$p.json" 2> "$out/diffusers-$p.log" || { tail -n 20 "$out/diffusers-$p.log"; }
  stop_sampling
  top=$(max_of "$out/smi-diffusers-$p.txt")
  python3 - "$out/diffusers-$p.json" "$p" "$idle" "$top" >> "$out/rows.txt" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception:
    print(f"diffusers-{sys.argv[2]} | diffusers | {sys.argv[2]} | (failed) | | |")
    sys.exit()
idle, top = int(sys.argv[3]), int(sys.argv[4] or 0)
s = sorted(r["seconds_per_image"][1:] or r["seconds_per_image"])
print(f"diffusers-{sys.argv[2]} | {r['peer']} | {sys.argv[2]} | whole pipeline on the device | "
      f"{r['max_memory_allocated'] / 2**30:.2f} (reserved {r['max_memory_reserved'] / 2**30:.2f}) | "
      f"{(top - idle) / 1024:.2f} | {s[len(s) // 2]:.3f}")
PY
  tail -n 1 "$out/rows.txt"
done
{ echo "| $(head -1 "$out/rows.txt") |"; echo "|---|---|---|---|---:|---:|---:|"
  tail -n +2 "$out/rows.txt" | sed 's/^/| /; s/$/ |/'; } > "$out/memory.md"
cat "$out/memory.md"

: > "$out/psnr.txt"
for c in $cases; do
  name="${c%%:*}"; rest="${c#*:}"; precision="${rest%%:*}"
  ref="$work/mem-standard-$precision"
  [[ "$name" != "standard-$precision" && -d "$ref" && -d "$work/mem-$name" ]] || continue
  python3 - "$work/mem-$name" "$ref" "$name" "standard-$precision" >> "$out/psnr.txt" <<'PY' \
    || echo "$name: PSNR not computed (python3 with numpy and PIL needed)" >> "$out/psnr.txt"
import glob, math, os, sys
import numpy as np
from PIL import Image
d, ref, name, ref_name = sys.argv[1:5]
def pngs(root):  # job folder ({prompt}-s{seed}-r{repeat}) -> PNG
    return {os.path.basename(os.path.dirname(f)): f for f in glob.glob(root + "/**/*.png", recursive=True)}
a, b = pngs(d), pngs(ref)
vals = []
for job in sorted(set(a) & set(b)):
    x = np.asarray(Image.open(a[job]).convert("RGB"), dtype=np.float64)
    y = np.asarray(Image.open(b[job]).convert("RGB"), dtype=np.float64)
    mse = float(np.mean((x - y) ** 2)) if x.shape == y.shape else float("nan")
    vals.append(math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse))
if not vals:
    print(f"{name} vs {ref_name}: no PNG of the same prompt and seed in both")
else:
    print(f"{name} vs {ref_name}: PSNR min {min(vals):.2f} dB, max {max(vals):.2f} dB over {len(vals)} images "
          f"(fp16/bf16 image gate 35 dB; inf: the same pixels)")
PY
done
cat "$out/psnr.txt"
