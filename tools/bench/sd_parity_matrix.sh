#!/usr/bin/env bash
# The checked matrix beyond SDXL fp32/fp16: hipq against diffusers, same GPU, same
# weight folder, 30 Euler steps, each job judged on the latent AND the image.
#
#   tools/bench/sd_parity_matrix.sh HIPQ_BINARY OUTDIR [ROW...]
#
# Rows (default: both):
#   sd2-768   SD 2.1 768-v architecture (synthetic:sd21: v_prediction, OpenCLIP-H, linear
#             projections), 768x768, fp32, guidance 7.5, judged against diffusers fp32.
#   sdxl-bf16 SDXL base architecture, 1024x1024, bf16, guidance 5, judged against its fp32
#             reference (diffusers in fp32 from the bf16 noise draw), with diffusers' own
#             bf16 run beside it.
# Each row runs tools/bench/sdxl_parity.sh (export, diffusers goldens with images, the hipq
# batch, run history, timings, agreement tables with latent metrics and image PSNR) into
# OUTDIR/ROW/, then prints one summary line per job from the run history: verdict,
# cosine, max_abs, rel_l2 and psnr as the worker judged them (host fp64 grading).
# Env: SEEDS ("0, 1"), PROMPTS (1), STEPS (30), REFERENCE_SRC, BACKEND, and
# EXPORT_DTYPE (f32 for sd2-768, bf16 for sdxl-bf16: both sides read the same stored
# weights; the sdxl-bf16 row halves its export that way). A row's work folder is
# /tmp/hipq-parity-ROW (reused when present).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
hipq="$(realpath "${1:?usage: sd_parity_matrix.sh HIPQ_BINARY OUTDIR [ROW...]}")"
out="$(mkdir -p "${2:?usage: sd_parity_matrix.sh HIPQ_BINARY OUTDIR [ROW...]}" && realpath "$2")"
shift 2
rows=("$@")
[[ ${#rows[@]} -eq 0 ]] && rows=(sd2-768 sdxl-bf16)
export SEEDS="${SEEDS:-0, 1}" PROMPTS="${PROMPTS:-1}" STEPS="${STEPS:-30}"

summary() {  # $1 row, $2 precision
  local db="$out/$1/$2.db"
  [[ -f "$db" ]] || { echo "$1 $2: no run database"; return; }
  "$hipq" runs --db "$db" --format json | python3 -c '
import json, sys
row, prec = sys.argv[1], sys.argv[2]
for r in json.load(sys.stdin):
    f = lambda k, spec: "-" if r.get(k) is None else format(r[k], spec)
    print("%s %s job %s: %s  cosine %s  max_abs %s  rel_l2 %s  psnr %s dB" % (
        row, prec, r.get("job", "?"), r.get("verdict", "?"), f("cosine", ".9f"), f("max_abs", ".3g"),
        f("rel_l2", ".3g"), f("psnr", ".2f")))' "$1" "$2" || true
}

for row in "${rows[@]}"; do
  mkdir -p "$out/$row"
  case "$row" in
    sd2-768)
      SYNTHETIC=sd21 SIZE=768 PRECISIONS=fp32 GUIDANCE=7.5 EXPORT_DTYPE="${EXPORT_DTYPE:-f32}" \
        WORKDIR=/tmp/hipq-parity-sd2-768 "$root/tools/bench/sdxl_parity.sh" "$hipq" "$out/$row" \
        2>&1 | tee "$out/$row/log.txt"
      summary "$row" fp32 | tee -a "$out/summary.txt"
      ;;
    sdxl-bf16)
      SYNTHETIC=sdxl SIZE=1024 PRECISIONS=bf16 GUIDANCE=5.0 EXPORT_DTYPE="${EXPORT_DTYPE:-bf16}" \
        WORKDIR=/tmp/hipq-parity-sdxl-bf16 "$root/tools/bench/sdxl_parity.sh" "$hipq" "$out/$row" \
        2>&1 | tee "$out/$row/log.txt"
      summary "$row" bf16 | tee -a "$out/summary.txt"
      ;;
    *) echo "unknown row '$row' (known: sd2-768, sdxl-bf16)" >&2; exit 2 ;;
  esac
  grep -h "vs ref-fp32\|vs diffusers-" "$out/$row"/agreement-*.txt 2>/dev/null | sed "s/^/$row: /" \
    | tee -a "$out/summary.txt" || true
done
echo "summary: $out/summary.txt"
