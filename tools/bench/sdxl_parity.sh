#!/usr/bin/env bash
# hipq against diffusers on full-size SDXL, one GPU, per precision.
#
#   tools/bench/sdxl_parity.sh HIPQ_BINARY OUTDIR
#
# 1. `hipq weights export synthetic:sdxl` writes the full SDXL base architecture
#    (synthetic values) as a diffusers folder in WORKDIR (skipped when present).
# 2. For each precision P in PRECISIONS, tools/golden/make_goldens.py runs diffusers on
#    that folder, same GPU, no TF32, for every (prompt, seed):
#      - fp32: the fp32 goldens the fp32 batch is judged against;
#      - fp16/bf16/fp8: the fp32 reference of the job (diffusers computing in fp32 from the
#        noise the job's precision draws), which the batch is judged against, and the
#        peer's own P run of the same job (for fp8, which diffusers does not run: its bf16
#        run from the same bf16 noise).
# 3. `hipq run` runs the batch (hipq's coordinator and one worker on the GPU), each job
#    judged against its golden with the manifest's gate; then run history, timing
#    statistics (per phase, per step), peak device memory, and the agreement table of
#    hipq P and diffusers P with the fp32 reference (tools/bench/latent_agreement.py).
# Every golden carries diffusers' decoded image, so each job is judged on the latent and
# the image (the default gate's PSNR bound), and the agreement tables give both.
# Env: STEPS (30), SIZE (1024), PRECISIONS ("fp32 fp16 bf16"), SEEDS ("0, 1"),
# PROMPTS (how many of the two prompts, 2), SYNTHETIC (sdxl; sd21 for SD 2.1 768-v;
# tiny-sdxl / tiny-sd2 for a dry run on a CPU box), WORKDIR (/tmp/hipq-sdxl-parity),
# EXPORT_DTYPE (f32; the stored weights both sides read), GUIDANCE (5.0), SAMPLER (euler),
# SPACING (timestep spacing; empty = the model's), TAG (a name for this case's files; default
# the sampler),
# REFERENCE_SRC (a diffusers checkout's src/, put on PYTHONPATH when diffusers is not
# installed), BACKEND (hip), EXTRA_DEFAULTS (YAML flow entries added to the manifest's
# defaults, e.g. "loras: [{path: /x/style.safetensors, scale: 0.8}]",
# "init_image: /x/init.png, strength: 0.6" or "refiner: {model: /x/refiner, switch_at: 0.8}"),
# GOLDEN_ARGS (more make_goldens.py arguments, e.g. "--refiner /x/refiner").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
hipq="$(realpath "${1:?usage: sdxl_parity.sh HIPQ_BINARY OUTDIR}")"
out="$(mkdir -p "${2:?usage: sdxl_parity.sh HIPQ_BINARY OUTDIR}" && realpath "$2")"
steps="${STEPS:-30}"; size="${SIZE:-1024}"; precisions="${PRECISIONS:-fp32 fp16 bf16}"
seeds="${SEEDS:-0, 1}"; n_prompts="${PROMPTS:-2}"; backend="${BACKEND:-hip}"
work="${WORKDIR:-/tmp/hipq-sdxl-parity}"; synthetic="${SYNTHETIC:-sdxl}"
export_dtype="${EXPORT_DTYPE:-f32}"; guidance="${GUIDANCE:-5.0}"
sampler="${SAMPLER:-euler}"; spacing="${SPACING:-}"; tag="${TAG:-$sampler}"
if [[ -n "${REFERENCE_SRC:-}" ]]; then
  PYTHONPATH="$(realpath "$REFERENCE_SRC")${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
mkdir -p "$work"
stamp() { echo "[$(date +%H:%M:%S)] $*"; }
all_prompts=("a photograph of an astronaut riding a horse" "a watercolor painting of a lighthouse at dawn")
prompts=("${all_prompts[@]:0:$n_prompts}")

model="$work/$synthetic"
if [[ ! -f "$model/model_index.json" ]]; then
  stamp "exporting synthetic:$synthetic to $model"
  "$hipq" weights export "synthetic:$synthetic" --out "$model" --dtype "$export_dtype" > "$out/export.log" 2>&1 \
    || { cat "$out/export.log"; exit 1; }
  tail -n 1 "$out/export.log"
fi

manifest() {  # $1 precision, $2 golden dir, $3 gate cosine
  cat <<YAML
batch: $synthetic-parity-$tag-$1
model: $model
defaults: {width: $size, height: $size, steps: $steps, guidance: $guidance, sampler: $sampler, precision: $1,
           ${spacing:+timestep_spacing: $spacing, }${EXTRA_DEFAULTS:+$EXTRA_DEFAULTS, }seeds: [$seeds]}
parity: {golden: $2, gate: {cosine_min: $3}}
outputs: {directory: $work/images/$1, save: [latent, png]}
prompts:
YAML
  local q
  for q in "${prompts[@]}"; do echo "  - $q"; done
}
goldens() {  # $1 manifest, $2 out dir, $3 log, [extra make_goldens args]
  local m="$1" dir="$2" log="$3"; shift 3
  rm -rf "$dir"
  # shellcheck disable=SC2086  # GOLDEN_ARGS are words on purpose
  CUDA_VISIBLE_DEVICES=0 python3 "$root/tools/golden/make_goldens.py" --model "$model" --model-name "$model" \
    --manifest "$m" --out "$dir" ${GOLDEN_ARGS:-} "$@" > "$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
  cat "$log"
}

for p in $precisions; do
  echo "================ $synthetic $p: ${#prompts[@]} prompt(s) x seeds [$seeds], ${size}px, $steps Euler steps, guidance $guidance"
  if [[ "$p" == fp32 ]]; then
    ref="$work/goldens-fp32"; gate=0.9999
  else
    ref="$work/goldens-$p-fp32ref"; gate=0.999
  fi
  manifest "$p" "$ref" "$gate" > "$out/manifest-$p.yaml"
  if [[ "$p" == fp32 ]]; then
    stamp "diffusers fp32 goldens"
    goldens "$out/manifest-$p.yaml" "$ref" "$out/goldens-fp32.log"
  else
    stamp "diffusers fp32 reference from the $p noise draw"
    goldens "$out/manifest-$p.yaml" "$ref" "$out/goldens-$p-fp32ref.log" --compute-precision fp32
    if [[ "$p" == fp8 ]]; then
      # diffusers runs no e4m3 UNet: its peer is diffusers bf16 from the same (bf16) noise draw.
      peer_label=diffusers-bf16
      stamp "diffusers bf16 from the fp8 job's noise (the peer; diffusers has no fp8)"
      goldens "$out/manifest-$p.yaml" "$work/goldens-$p-peer" "$out/goldens-$p-peer.log" --compute-precision bf16
    else
      peer_label="diffusers-$p"
      stamp "diffusers $p (the peer at the same precision)"
      goldens "$out/manifest-$p.yaml" "$work/goldens-$p-peer" "$out/goldens-$p-peer.log"
    fi
  fi
  db="$out/$p.db"
  rm -f "$db" "$db"-wal "$db"-shm
  rm -rf "$work/images/$p"
  stamp "hipq $p batch"
  "$hipq" run "$out/manifest-$p.yaml" --db "$db" --backend "$backend" > "$out/run-$p.log" 2>&1 \
    || echo "hipq run for $p exited with $? (see run-$p.log)"
  tail -n 25 "$out/run-$p.log"
  echo "---- $p: run history"
  "$hipq" runs --db "$db" | tee "$out/runs-$p.txt"
  "$hipq" runs --db "$db" --format json > "$out/runs-$p.json"
  python3 -c 'import json, sys; r = [x.get("peak_memory_bytes") or 0 for x in json.load(open(sys.argv[1]))]
print("peak device memory (max over %d jobs): %.2f GiB" % (len(r), max(r + [0]) / 2**30))' "$out/runs-$p.json" || true
  echo "---- $p: timings"
  "$hipq" stats --db "$db" | tee "$out/stats-$p.txt"
  echo "---- $p: agreement with the fp32 reference"
  python3 "$root/tools/bench/latent_agreement.py" "$work/images/$p" "$ref" --label-a "hipq-$p" --label-b "ref-fp32" \
    | tee "$out/agreement-$p.txt" || true
  if [[ "$p" != fp32 ]]; then
    python3 "$root/tools/bench/latent_agreement.py" "$work/goldens-$p-peer" "$ref" --label-a "$peer_label" \
      --label-b "ref-fp32" | tee -a "$out/agreement-$p.txt" || true
    python3 "$root/tools/bench/latent_agreement.py" "$work/images/$p" "$work/goldens-$p-peer" --label-a "hipq-$p" \
      --label-b "$peer_label" | tee -a "$out/agreement-$p.txt" || true
  fi
  echo "---- diffusers seconds per image ($p):"
  cat "$out"/goldens-"$p"*.log | grep -oE '\(([0-9.]+) s\)$' | tr -d '()s ' | tr '\n' ' '; echo
done
