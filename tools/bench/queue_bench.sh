#!/usr/bin/env bash
# Queue throughput benchmark (not a test): a coordinator, N workers running the
# SleepEngine test double with zero work (`--engine sleep:0`), one batch of JOBS jobs.
# Measures, from the durable timestamps in the database:
#   jobs/s         = jobs / (last result recorded - first lease)
#   overhead/job   = per worker, the gap between recording one result and leasing
#                    its next job (the lease its report's ask gets, and the worker's
#                    wake-up around it: docs/protocol.md), p50 / p99; 0 where
#                    the next job was leased before the result (a worker with credit 2
#                    holds it while it runs one: docs/protocol.md, "Credit and prefetch")
#   next held      = the share of those gaps that are 0 for that reason
# Usage: tools/bench/queue_bench.sh [HIPQ_BINARY] [JOBS] [WORKERS...]
#   e.g. tools/bench/queue_bench.sh build/cli/hipq 2000 1 8 64
# WORKER_ARGS: extra `hipq worker` flags (e.g. "--credit 1", the hand-off without prefetch).
# HIPQ_BENCH_METRICS=1: the coordinator also serves its monitor (--metrics-bind) and
# /metrics and / are fetched every second while the batch runs (a Prometheus scrape and
# an open status page), to measure what the monitor costs the queue (docs/metrics.md).
set -euo pipefail
HIPQ=${1:-build/cli/hipq}
JOBS=${2:-2000}
shift $(( $# >= 2 ? 2 : $# )) || true
WORKER_COUNTS=("$@")
[ ${#WORKER_COUNTS[@]} -eq 0 ] && WORKER_COUNTS=(1 8 64)
HIPQ=$(readlink -f "$HIPQ")

run_one() {
  local workers=$1 dir
  dir=$(mktemp -d)
  local prompts=$(( (JOBS + 9) / 10 ))
  {
    echo "batch: bench"
    echo "model: synthetic:tiny-sdxl"
    echo "defaults: {width: 64, height: 64, steps: 1, seeds: {from: 0, count: 10}}"
    echo "parity: {golden: none}"
    echo "outputs: {directory: out, save: [latent]}"
    echo "prompts:"
    for ((i = 0; i < prompts; i++)); do echo "  - bench prompt $i"; done
  } > "$dir/bench.yaml"
  local monitor=()
  [ "${HIPQ_BENCH_METRICS:-0}" = 1 ] && monitor=(--metrics-bind 127.0.0.1:0 --metrics-address-file "$dir/maddr")
  "$HIPQ" --log-level warn coordinator --db "$dir/hipq.db" --bind 'tcp://127.0.0.1:*' \
      --endpoint-file "$dir/endpoint" ${monitor[@]+"${monitor[@]}"} > "$dir/coord.log" 2>&1 &
  local coord=$!
  for _ in $(seq 100); do [ -s "$dir/endpoint" ] && break; sleep 0.05; done
  local scraper=""
  if [ "${HIPQ_BENCH_METRICS:-0}" = 1 ]; then
    for _ in $(seq 100); do [ -s "$dir/maddr" ] && break; sleep 0.05; done
    local maddr
    maddr=$(cat "$dir/maddr")
    ( while :; do curl -s -o /dev/null "http://$maddr/metrics"; curl -s -o /dev/null "http://$maddr/"; sleep 1; done ) &
    scraper=$!
  fi
  local ep
  ep=$(cat "$dir/endpoint")
  local pids=()
  for ((w = 0; w < workers; w++)); do
    # shellcheck disable=SC2086
    "$HIPQ" --log-level error worker --connect "$ep" --engine sleep:0 --backend cpu --id "w$w" ${WORKER_ARGS:-} \
        > "$dir/w$w.log" 2>&1 &
    pids+=($!)
  done
  sleep 2   # let every worker connect and ask for work
  "$HIPQ" --log-level warn submit "$dir/bench.yaml" --connect "$ep" --wait --timeout 30 > "$dir/submit.log" 2>&1
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
  kill "${pids[@]}" 2>/dev/null || true
  kill "$coord" 2>/dev/null || true
  wait 2>/dev/null || true
  python3 - "$dir/hipq.db" "$workers" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT worker_id, started_at, finished_at FROM attempts WHERE state = 'done' "
                  "ORDER BY worker_id, started_at").fetchall()
n = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
distinct = db.execute("SELECT COUNT(DISTINCT job_id) FROM results").fetchone()[0]
first = min(r[1] for r in rows); last = max(r[2] for r in rows)
gaps = []
held = 0
for a, b in zip(rows, rows[1:]):
    if a[0] == b[0]:
        gap = (b[1] - a[2]) * 1e3
        held += gap < 0
        gaps.append(max(0.0, gap))
gaps.sort()
def pct(p):
    return gaps[min(len(gaps) - 1, int(round(p * (len(gaps) - 1))))] if gaps else float('nan')
print(f"| {sys.argv[2]:>3} | {n} ({distinct} distinct) | {n / (last - first):8.0f} | {pct(0.5):6.2f} | {pct(0.99):6.2f} "
      f"| {100 * held / max(1, len(gaps)):3.0f} % |")
PY
  rm -rf "$dir"
}

echo "| workers | results | jobs/s | overhead p50 ms | overhead p99 ms | next held |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
for w in "${WORKER_COUNTS[@]}"; do run_one "$w"; done
