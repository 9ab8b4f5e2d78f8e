#!/usr/bin/env bash
# Scale-out run on one multi-GPU box: one coordinator, `hipq worker --all-devices`
# restricted to the first N GPUs, for each N in GPU_COUNTS; a batch of 8 jobs per GPU
# (8 prompt x seed settings, repeated N times) of SDXL-size work on synthetic weights.
# The 1-GPU batch is promoted to goldens (reference: hipq itself at this build), so the
# larger batches are judged against it. Prints images/hour per N, scaling efficiency,
# per-GPU utilisation (nvidia-smi sampling), coordinator CPU use and `hipq stats`.
#   tools/bench/scaleout.sh HIPQ_BINARY OUTDIR [GPU_COUNTS="1 2 4"]
# Env: STEPS (8), SIZE (1024), PRECISION (fp16), MODEL (synthetic:sdxl).
set -euo pipefail
hipq="$(realpath "${1:?usage: scaleout.sh HIPQ_BINARY OUTDIR [GPU_COUNTS]}")"
out="$(mkdir -p "$2" && realpath "$2")"
counts="${3:-1 2 4}"
steps="${STEPS:-8}"; size="${SIZE:-1024}"; precision="${PRECISION:-fp16}"; model="${MODEL:-synthetic:sdxl}"
db="$out/scaleout.db"
rm -f "$db" "$db"-wal "$db"-shm
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$hipq" coordinator --db "$db" --bind 'tcp://127.0.0.1:*' --endpoint-file "$out/endpoint" \
  --golden-dir "$out/goldens" > "$out/coordinator.log" 2>&1 &
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
  jobs=$(( 8 * n ))
  cat > "$out/manifest-$n.yaml" <<YAML
batch: scaleout-${n}gpu
model: $model
defaults: {width: $size, height: $size, steps: $steps, guidance: 5.0, sampler: euler, precision: $precision,
           seeds: [0, 1, 2, 3], repeats: $n}
parity: {golden: store, gate: {cosine_min: 0.999}}
outputs: {directory: out-$n, save: [latent, png]}
prompts:
  - a photograph of an astronaut riding a horse
  - a watercolor painting of a lighthouse at dawn
YAML
  visible=$(seq -s, 0 $(( n - 1 )))
  CUDA_VISIBLE_DEVICES="$visible" "$hipq" worker --connect "$ep" --all-devices > "$out/workers-$n.log" 2>&1 &
  wpid=$!
  pids+=("$wpid")
  c0=$(cpu_ticks); t0=$(date +%s.%N)
  "$hipq" submit "$out/manifest-$n.yaml" --connect "$ep" --wait > "$out/submit-$n.log" 2>&1 || true
  t1=$(date +%s.%N); c1=$(cpu_ticks)
  kill -TERM "$wpid" 2>/dev/null || true
  wait "$wpid" 2>/dev/null || true
  python3 -c "import sys; n,j,t0,t1,c0,c1,tck=sys.argv[1:]; w=float(t1)-float(t0)
print(n, j, f'{w:.1f}', f'{int(j)*3600/w:.1f}', f'{(int(c1)-int(c0))/int(tck):.2f}')" \
    "$n" "$jobs" "$t0" "$t1" "$c0" "$c1" "$clk_tck" >> "$out/scaleout.txt"
  if [[ "$n" == "$(echo "$counts" | awk '{print $1}')" ]]; then
    "$hipq" golden promote "$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT MAX(id) FROM batches').fetchone()[0])" "$db")" \
      --db "$db" --store "$out/goldens" > "$out/promote.log" 2>&1 || true
  fi
done

echo "== throughput"; cat "$out/scaleout.txt"
awk 'NR==2 {base=$4} NR>1 {printf "n=%s images/hour=%.1f efficiency=%.1f%%\n", $1, $4, 100*$4/(base*$1)}' "$out/scaleout.txt"
echo "== GPU utilisation while busy (mean of samples > 0 per GPU)"
awk -F', ' '$2 > 0 {s[$1]+=$2; c[$1]++} END {for (g in s) printf "gpu %s: %.1f%% (%d samples)\n", g, s[g]/c[g], c[g]}' "$out/gpu_util.csv"
echo "== stats"
"$hipq" stats --db "$db" --group-by batch,gpu | tee "$out/stats.txt"
"$hipq" stats --db "$db" --group-by batch --format json > "$out/stats.json" || true
