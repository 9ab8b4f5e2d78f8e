#!/usr/bin/env bash
# What a batch of a million jobs costs (not a test): a coordinator started with
# --max-batch-jobs JOBS, a manifest of 10 prompts x JOBS/10 seeds submitted to it,
# WORKERS zero-work workers (the SleepEngine test double, `--engine sleep:0`) running
# for RUN_SECONDS, then `hipq status`, `hipq runs`, `hipq stats` (with `--parity`),
# `hipq compare` and `hipq report` on
# the batch, each timed with its peak memory (/usr/bin/time -v). Prints one markdown
# row per step: wall seconds and peak resident memory of the process that did the work
# (the coordinator's own peak for what it answers, read from /proc before and after).
#
#   tools/bench/million_batch.sh HIPQ_BINARY [JOBS=1000000] [WORKERS=8] [RUN_SECONDS=60]
#
# Needs GNU time (/usr/bin/time), python3; about 1 GB of disk per million jobs.
set -euo pipefail
hipq="$(realpath "${1:?usage: million_batch.sh HIPQ_BINARY [JOBS] [WORKERS] [RUN_SECONDS]}")"
jobs="${2:-1000000}"; workers="${3:-8}"; run_seconds="${4:-60}"
[[ -x /usr/bin/time ]] || { echo "million_batch.sh needs GNU time (/usr/bin/time)" >&2; exit 2; }
(( jobs % 10 == 0 && jobs <= 10 * 100000 )) || { echo "JOBS must be a multiple of 10, at most 1000000" >&2; exit 2; }
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP_TMP:-}" == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ---- the manifest: 10 prompts x JOBS/10 seeds ------------------------------------------
{
  echo "batch: million"
  echo "model: synthetic:tiny-sdxl"
  echo "defaults: {width: 64, height: 64, steps: 1, seeds: {from: 0, count: $(( jobs / 10 ))}}"
  echo "parity: {golden: none}"
  echo "outputs: {directory: out, save: [latent]}"
  echo "prompts:"
  for i in $(seq 0 9); do echo "  - million prompt $i"; done
} > "$tmp/million.yaml"

"$hipq" --log-level warn coordinator --db "$tmp/hipq.db" --bind 'tcp://127.0.0.1:*' --max-batch-jobs "$jobs" \
  --endpoint-file "$tmp/endpoint" > "$tmp/coordinator.log" 2>&1 &
coord=$!; pids+=("$coord")
for _ in $(seq 100); do [[ -s "$tmp/endpoint" ]] && break; sleep 0.05; done
ep="$(cat "$tmp/endpoint")"
hwm() { awk '/VmHWM/ {print $2}' "/proc/$coord/status"; }  # the coordinator's peak RSS so far, KiB

row() {  # $1 step, $2 time -v output file, $3 coordinator peak before, $4 after
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$2")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$2")
  printf "| %s | %.1f | %d | %d |\n" "$1" "$wall" $(( rss / 1024 )) $(( $4 / 1024 ))
}
timed() {  # $1 step name, rest: command; prints its row
  local name=$1; shift
  local before; before=$(hwm)
  /usr/bin/time -v "$@" > "$tmp/out.txt" 2> "$tmp/time.txt" || { cat "$tmp/out.txt" "$tmp/time.txt"; echo "$name failed" >&2; exit 1; }
  row "$name" "$tmp/time.txt" "$before" "$(hwm)"
}

echo "| step | wall s | peak RSS of the command, MiB | coordinator peak RSS so far, MiB |"
echo "| --- | ---: | ---: | ---: |"
echo "| coordinator started | - | - | $(( $(hwm) / 1024 )) |"
timed "submit $jobs jobs (client check + coordinator expand/check/insert)" \
  "$hipq" --log-level warn submit "$tmp/million.yaml" --connect "$ep" --timeout 600
for ((w = 0; w < workers; w++)); do
  "$hipq" --log-level error worker --connect "$ep" --engine sleep:0 --backend cpu --id "w$w" > /dev/null 2>&1 &
  pids+=($!)
done
sleep "$run_seconds"
for ((w = 1; w <= workers; w++)); do kill -TERM "${pids[$w]}" 2>/dev/null || true; done
sleep 1
results=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM results').fetchone()[0])" "$tmp/hipq.db")
echo "| $workers workers ran $run_seconds s: $results results | - | - | $(( $(hwm) / 1024 )) |"
timed "hipq status (coordinator)" "$hipq" --log-level warn status --connect "$ep"
timed "hipq status 1 (coordinator)" "$hipq" --log-level warn status 1 --connect "$ep"
timed "hipq runs --batch 1 --limit 20 (coordinator)" "$hipq" --log-level warn runs --batch 1 --limit 20 --connect "$ep" --timeout 600
timed "hipq runs --batch 1 --format csv (database, every job)" "$hipq" --log-level warn runs --batch 1 --format csv --db "$tmp/hipq.db"
timed "hipq stats --batch 1 (coordinator)" "$hipq" --log-level warn stats --batch 1 --connect "$ep" --timeout 600
timed "hipq stats --batch 1 (database)" "$hipq" --log-level warn stats --batch 1 --db "$tmp/hipq.db"
timed "hipq stats --batch 1 --parity (database)" "$hipq" --log-level warn stats --batch 1 --parity --db "$tmp/hipq.db"
timed "hipq compare batch=1 batch=1 --runs all (database)" \
  "$hipq" --log-level warn compare batch=1 batch=1 --runs all --phase total --db "$tmp/hipq.db"
timed "hipq report --batch 1 (coordinator)" "$hipq" --log-level warn report --batch 1 --connect "$ep" --timeout 600 --html "$tmp/report.html"
timed "hipq report --batch 1 (database)" "$hipq" --log-level warn report --batch 1 --db "$tmp/hipq.db" --html "$tmp/report.html"
echo "| database file: $(( $(stat -c %s "$tmp/hipq.db") / 1048576 )) MiB, report $(( $(stat -c %s "$tmp/report.html") / 1024 )) KiB | - | - | - |"
