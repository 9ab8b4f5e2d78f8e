#!/usr/bin/env bash
# Full-size SDXL on one multi-GPU box, checked against diffusers, on 1 then N GPUs.
#
#   tools/bench/scaleout.sh HIPQ_BINARY OUTDIR [GPU_COUNTS="1 2"]
#
# 1. `hipq weights export synthetic:sdxl` writes the full SDXL base architecture
#    (2.6 B UNet parameters, synthetic values) as a diffusers folder in WORKDIR.
# 2. tools/golden/make_goldens.py runs diffusers (the peer) on the same folder, same
#    GPU, fp32 without TF32, for every (prompt, seed) of the batch: the goldens, and
#    the peer's seconds per image.
# 3. One coordinator; for each N in GPU_COUNTS, `hipq worker --all-devices` on the
#    first N GPUs and a batch of 4 x PER_GPU jobs per GPU (2 prompts x 2 seeds,
#    N x PER_GPU repeats),
#    every job judged against the diffusers golden of its (prompt, seed).
# Prints images/hour per N, scaling efficiency, per-GPU utilisation (nvidia-smi
# sampling), coordinator CPU, parity verdicts and `hipq stats` per batch and GPU.
# Env: STEPS (4), SIZE (1024), PRECISION (fp32), SYNTHETIC (sdxl; tiny-sdxl for a
# dry run on a CPU box), WORKDIR (/tmp/hipq-scaleout: the 13 GB weight folder),
# REFERENCE (diffusers | none: no goldens, every verdict NO_GOLDEN), REFERENCE_SRC
# (a diffusers checkout's src/, put on PYTHONPATH when diffusers is not installed),
# BATCH_TIMEOUT (s per batch, 900), PER_GPU (1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
hipq="$(realpath "${1:?usage: scaleout.sh HIPQ_BINARY OUTDIR [GPU_COUNTS]}")"
out="$(mkdir -p "$2" && realpath "$2")"
counts="${3:-1 2}"
steps="${STEPS:-4}"; size="${SIZE:-1024}"; precision="${PRECISION:-fp32}"
work="${WORKDIR:-/tmp/hipq-scaleout}"
synthetic="${SYNTHETIC:-sdxl}"; reference="${REFERENCE:-diffusers}"
batch_timeout="${BATCH_TIMEOUT:-900}"; per_gpu="${PER_GPU:-1}"
if [[ -n "${REFERENCE_SRC:-}" ]]; then
  PYTHONPATH="$(realpath "$REFERENCE_SRC")${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
db="$out/scaleout.db"
rm -f "$db" "$db"-wal "$db"-shm
mkdir -p "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
stamp() { echo "[$(date +%H:%M:%S)] $*"; }

# ---- 1. weights -----------------------------------------------------------------------------
model="$work/$synthetic"
if [[ ! -f "$model/model_index.json" ]]; then
  stamp "exporting synthetic:$synthetic to $model"
  "$hipq" weights export "synthetic:$synthetic" --out "$model" > "$out/export.log" 2>&1 || { cat "$out/export.log"; exit 1; }
fi
tail -n 1 "$out/export.log" 2>/dev/null || true

# ---- 2. the peer: diffusers on the same folder, same GPU --------------------------------------
prompts=("a photograph of an astronaut riding a horse" "a watercolor painting of a lighthouse at dawn")
manifest_head() {  # $1 batch name, $2 repeats
  cat <<YAML
batch: $1
model: $model
defaults: {width: $size, height: $size, steps: $steps, guidance: 5.0, sampler: euler, precision: $precision,
           seeds: [0, 1], repeats: $2}
parity: {golden: $golden, gate: {cosine_min: 0.999}}
outputs: {directory: $work/images/$1, save: [latent, png]}
prompts:
YAML
  for p in "${prompts[@]}"; do echo "  - $p"; done
}
if [[ "$reference" == diffusers ]]; then
  golden="$work/goldens"
  manifest_head reference 1 > "$out/manifest-reference.yaml"
  stamp "diffusers goldens (${#prompts[@]} prompts x 2 seeds, ${size}px, $steps steps, $precision)"
  CUDA_VISIBLE_DEVICES=0 python3 "$root/tools/golden/make_goldens.py" --model "$model" --model-name "$model" \
    --manifest "$out/manifest-reference.yaml" --out "$work/goldens" > "$out/goldens.log" 2>&1 \
    || { tail -n 30 "$out/goldens.log"; exit 1; }
  cat "$out/goldens.log"
else
  golden=none
  : > "$out/goldens.log"
fi

# ---- 3. hipq on 1..N GPUs -------------------------------------------------------------------
rm -f "$out/endpoint"
"$hipq" coordinator --db "$db" --bind 'tcp://127.0.0.1:*' --endpoint-file "$out/endpoint" \
  > "$out/coordinator.log" 2>&1 &
coord_pid=$!
pids+=("$coord_pid")
for _ in $(seq 100); do [[ -s "$out/endpoint" ]] && break; sleep 0.1; done
ep="$(cat "$out/endpoint")"
clk_tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$coord_pid/stat"; }

nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
  > "$out/gpu_util.csv" 2>/dev/null &
pids+=($!)

echo "n_gpus jobs wall_s images_per_hour coord_cpu_s" > "$out/scaleout.txt"
for n in $counts; do
  jobs=$(( 2 * ${#prompts[@]} * n * per_gpu ))
  manifest_head "scaleout-${n}gpu" "$(( n * per_gpu ))" > "$out/manifest-$n.yaml"
  visible=$(seq -s, 0 $(( n - 1 )))
  CUDA_VISIBLE_DEVICES="$visible" "$hipq" worker --connect "$ep" --all-devices > "$out/workers-$n.log" 2>&1 &
  wpid=$!
  pids+=("$wpid")
  stamp "batch of $jobs jobs on $n GPU(s)"
  c0=$(cpu_ticks); t0=$(date +%s.%N)
  timeout "$batch_timeout" "$hipq" submit "$out/manifest-$n.yaml" --connect "$ep" --wait > "$out/submit-$n.log" 2>&1 \
    || echo "batch on $n GPU(s) did not finish (rc $?); see $out/submit-$n.log"
  t1=$(date +%s.%N); c1=$(cpu_ticks)
  tail -n 3 "$out/submit-$n.log"
  kill -TERM "$wpid" 2>/dev/null || true
  wait "$wpid" 2>/dev/null || true
  python3 -c "import sys; n,j,t0,t1,c0,c1,tck=sys.argv[1:]; w=float(t1)-float(t0)
print(n, j, f'{w:.1f}', f'{int(j)*3600/w:.1f}', f'{(int(c1)-int(c0))/int(tck):.2f}')" \
    "$n" "$jobs" "$t0" "$t1" "$c0" "$c1" "$clk_tck" >> "$out/scaleout.txt"
done

echo "== throughput (wall clock includes each batch's model load)"; cat "$out/scaleout.txt"
awk 'NR==2 {base=$4} NR>1 {printf "n=%s images/hour=%.1f efficiency=%.1f%%\n", $1, $4, 100*$4/(base*$1)}' "$out/scaleout.txt"
echo "== GPU utilisation while busy (mean of samples > 0 per GPU)"
awk -F', ' '$2 > 0 {s[$1]+=$2; c[$1]++} END {for (g in s) printf "gpu %s: %.1f%% (%d samples)\n", g, s[g]/c[g], c[g]}' "$out/gpu_util.csv"
echo "== parity against diffusers"
"$hipq" runs --db "$db" | tee "$out/runs.txt" | head -n 40
echo "== diffusers seconds per image (same GPU, same folder, $precision, no TF32)"
grep -oE '\(([0-9.]+) s\)$' "$out/goldens.log" | tr -d '()s ' | tr '\n' ' '; echo
echo "== stats"
"$hipq" stats --db "$db" --group-by batch,gpu | tee "$out/stats.txt"
"$hipq" stats --db "$db" --group-by batch --format json > "$out/stats.json" || true
