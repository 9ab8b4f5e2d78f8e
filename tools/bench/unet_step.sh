#!/usr/bin/env bash
# The UNet step benchmark of docs/benchmarks.md, on the GPU machine:
#   tools/bench/unet_step.sh HIPQ_BINARY OUTDIR
# 1. `hipq weights export synthetic:sdxl` (full SDXL shapes) into WORKDIR unless present;
# 2. tools/bench/unet_step.py: hipq's step against PyTorch eager / CUDA graph /
#    torch.compile on that folder, fp16 and bf16 (torch.compile for fp16 only: it
#    takes minutes), and hipq with its step graphs off (HIPQ_STEP_GRAPHS=0);
# 3. where Nsight Compute is installed, the device time of a 2-step fp16 generate
#    per kernel (tools/bench/kernel_profile.py).
# Env: WORKDIR (/tmp/hipq-unet-step), REFERENCE_SRC (a diffusers checkout's src/),
# SIZE (1024), PROFILE (1: run step 3), VARIANTS (more fp16 hipq runs in the same
# call, each NAME=VALUE[,NAME=VALUE...], space-separated: e.g. the knobs of
# kernels/dev/README.md, "HIPQ_ATTN_WGMMA=3 HIPQ_ATTN_WGMMA=auto,HIPQ_ATTN_WGMMA_KEYS=any").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
hipq="$(realpath "${1:?usage: unet_step.sh HIPQ_BINARY OUTDIR}")"
out="$(mkdir -p "${2:?usage: unet_step.sh HIPQ_BINARY OUTDIR}" && realpath "$2")"
work="${WORKDIR:-/tmp/hipq-unet-step}"; size="${SIZE:-1024}"
if [[ -n "${REFERENCE_SRC:-}" ]]; then
  PYTHONPATH="$(realpath "$REFERENCE_SRC")${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
bench="$root/tools/bench"
[[ -f "$bench/unet_step.py" ]] || bench="$(dirname "$hipq")"
mkdir -p "$work"
model="$work/sdxl"
if [[ ! -f "$model/model_index.json" ]]; then
  "$hipq" weights export synthetic:sdxl --out "$model" > "$out/export.log" 2>&1 || { cat "$out/export.log"; exit 1; }
fi
export PYTHONUNBUFFERED=1
variants=(--hipq-env HIPQ_STEP_GRAPHS=0)
for v in ${VARIANTS:-}; do variants+=(--hipq-env "$v"); done
python3 "$bench/unet_step.py" --model "$model" --hipq "$hipq" --size "$size" --precision fp16 \
  --modes eager graph compile "${variants[@]}" --json "$out/unet_step_fp16.json" | tee "$out/unet_step.md"
python3 "$bench/unet_step.py" --model "$model" --hipq "$hipq" --size "$size" --precision bf16 \
  --modes eager graph --json "$out/unet_step_bf16.json" | tee -a "$out/unet_step.md"
if [[ "${PROFILE:-1}" == 1 ]] && command -v ncu > /dev/null; then
  HIPQ_STEP_GRAPHS=0 timeout 300 ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
    --log-file "$out/profile.csv" "$hipq" generate --model "$model" --prompt "a red fox" --steps 2 \
    --width "$size" --height "$size" --precision fp16 --backend hip --no-progress --out "$work/profile" > /dev/null 2>&1 || true
  python3 "$bench/kernel_profile.py" "$out/profile.csv" --top 30 | tee "$out/profile.md"
fi
