#!/usr/bin/env bash
# Exactly once across many hosts (not a test): one coordinator and HOSTS x PER_HOST
# zero-work workers (the SleepEngine test double, `--engine sleep:0`), each "host" a
# network namespace with its own address and host name, joined by a bridge in a switch
# namespace (the layout of tests/multihost/multihost_test.sh). One batch of JOBS jobs;
# with KILL=N, N workers are killed (SIGKILL) once a third of the results are in, so
# their leases expire and their jobs run again elsewhere. Then, from the database:
# every job done, exactly one result per job, no job with two successful attempts,
# results from every host; and the rate (jobs / (last result - first lease)).
#
#   tools/bench/queue_netns_bench.sh HIPQ_BINARY [JOBS=20000] [HOSTS=8] [PER_HOST=32]
#   e.g. KILL=8 tools/bench/queue_netns_bench.sh build/cli/hipq 20000 8 32
#
# Needs: root (it creates network namespaces, veth pairs and a bridge; all are removed
# on exit), iproute2 (`ip`), util-linux (`unshare`), sqlite3 and python3. About 12 MB
# of memory per worker process. Exits 1 naming what did not hold.
set -euo pipefail
hipq="$(realpath "${1:?usage: queue_netns_bench.sh HIPQ_BINARY [JOBS] [HOSTS] [PER_HOST]}")"
jobs_total="${2:-20000}"; hosts="${3:-8}"; per_host="${4:-32}"; kill_n="${KILL:-0}"
if (( EUID != 0 )); then
  echo "queue_netns_bench.sh needs root: it creates network namespaces (ip netns add), veth pairs and a bridge" >&2
  exit 2
fi
for tool in ip unshare sqlite3 python3; do
  command -v "$tool" >/dev/null || { echo "queue_netns_bench.sh needs $tool" >&2; exit 2; }
done
(( hosts >= 1 && hosts <= 200 )) || { echo "HOSTS must be 1..200" >&2; exit 2; }

p="hqb$(( $$ % 10000 ))"
sw="${p}sw"; coord="${p}c"
host_ns=(); for ((h = 1; h <= hosts; h++)); do host_ns+=("${p}h$h"); done
net=10.204.$(( $$ % 200 + 20 ))
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in "$coord" "${host_ns[@]}" "$sw"; do ip netns del "$ns" 2>/dev/null || true; done
  if [[ "${KEEP_TMP:-}" == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$tmp/coordinator.log" 2>/dev/null; exit 1; }
stamp() { echo "[$(date +%H:%M:%S)] $*"; }

# ---- network: a bridge in the switch namespace, one veth per host ------------------------
ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
all_ns=("$coord" "${host_ns[@]}")
for i in "${!all_ns[@]}"; do
  ns="${all_ns[$i]}"
  ip netns add "$ns"
  ip link add "${p}v$i" type veth peer name "${p}s$i"
  ip link set "${p}v$i" netns "$ns"
  ip link set "${p}s$i" netns "$sw"
  ip -n "$ns" link set "${p}v$i" name eth0
  ip -n "$ns" addr add "$net.$(( i + 1 ))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$sw" link set "${p}s$i" master br0
  ip -n "$sw" link set "${p}s$i" up
done
stamp "network: coordinator at $net.1, $hosts hosts at $net.2-$net.$(( hosts + 1 ))"

# ---- coordinator: its namespace's address, no CURVE (a closed test network) ---------------
ip netns exec "$coord" "$hipq" --log-level warn coordinator --db "$tmp/hipq.db" --bind "tcp://$net.1:*" \
  --insecure --endpoint-file "$tmp/endpoint" > "$tmp/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "$tmp/endpoint" ]] && break; sleep 0.1; done
[[ -s "$tmp/endpoint" ]] || fail "coordinator did not write its endpoint"
ep="$(cat "$tmp/endpoint")"

# ---- workers: PER_HOST per host namespace, each host with its own host name ---------------
worker_pids=()
for ((h = 1; h <= hosts; h++)); do
  ns="${host_ns[$(( h - 1 ))]}"
  for ((w = 0; w < per_host; w++)); do
    ip netns exec "$ns" unshare --uts sh -c "hostname host$h && exec \"\$0\" \"\$@\"" \
      "$hipq" --log-level error worker --connect "$ep" --engine sleep:0 --backend cpu --id "host$h-w$w" \
      > /dev/null 2>&1 &
    pids+=($!); worker_pids+=($!)
  done
done
workers=$(( hosts * per_host ))
sql() { sqlite3 -readonly "$tmp/hipq.db" "$1"; }
deadline=$(( SECONDS + 120 ))
until [[ "$(sql "SELECT COUNT(*) FROM workers WHERE state IN ('idle', 'busy');" 2>/dev/null || echo 0)" == "$workers" ]]; do
  (( SECONDS < deadline )) || fail "only $(sql "SELECT COUNT(*) FROM workers WHERE state IN ('idle', 'busy');") of $workers workers connected"
  sleep 0.5
done
stamp "$workers workers connected"
sleep 2   # every worker has asked for work

# ---- the batch ----------------------------------------------------------------------------
prompts=$(( (jobs_total + 9) / 10 ))
{
  echo "batch: netns"
  echo "model: synthetic:tiny-sdxl"
  echo "defaults: {width: 64, height: 64, steps: 1, seeds: {from: 0, count: 10}}"
  echo "parity: {golden: none}"
  echo "outputs: {directory: out, save: [latent]}"
  echo "prompts:"
  for ((i = 0; i < prompts; i++)); do echo "  - netns prompt $i"; done
} > "$tmp/batch.yaml"
jobs_total=$(( prompts * 10 ))
ip netns exec "${host_ns[0]}" "$hipq" --log-level warn submit "$tmp/batch.yaml" --connect "$ep" \
  > "$tmp/submit.log" 2>&1 || { cat "$tmp/submit.log"; fail "submit failed"; }
stamp "batch of $jobs_total jobs submitted"
deadline=$(( SECONDS + 600 ))
if (( kill_n > 0 )); then
  until (( $(sql "SELECT COUNT(*) FROM results;") >= jobs_total / 3 )); do
    (( SECONDS < deadline )) || fail "no progress"
    sleep 0.05
  done
  for ((k = 0; k < kill_n; k++)); do kill -KILL "${worker_pids[$(( k * workers / kill_n ))]}" 2>/dev/null || true; done
  stamp "killed $kill_n workers (SIGKILL) after $(sql "SELECT COUNT(*) FROM results;") results"
fi
until [[ "$(sql "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'leased');")" == 0 ]]; do
  (( SECONDS < deadline )) || fail "batch did not finish: $(sql "SELECT COUNT(*) FROM results;") of $jobs_total results"
  sleep 0.2
done
sleep 1   # late reports of killed or slow workers arrive (and must be dropped)

# ---- verdict ------------------------------------------------------------------------------
n_jobs=$(sql "SELECT COUNT(*) FROM jobs;")
done_jobs=$(sql "SELECT COUNT(*) FROM jobs WHERE state = 'done';")
n_results=$(sql "SELECT COUNT(*) FROM results;")
distinct=$(sql "SELECT COUNT(DISTINCT job_id) FROM results;")
doubled=$(sql "SELECT COUNT(*) FROM (SELECT job_id FROM results GROUP BY job_id HAVING COUNT(*) > 1);")
two_done=$(sql "SELECT COUNT(*) FROM (SELECT job_id FROM attempts WHERE state = 'done' GROUP BY job_id HAVING COUNT(*) > 1);")
expired=$(sql "SELECT COUNT(*) FROM attempts WHERE state = 'expired';")
result_hosts=$(sql "SELECT COUNT(DISTINCT w.host) FROM results r JOIN workers w ON w.id = r.worker_id;")
result_workers=$(sql "SELECT COUNT(DISTINCT worker_id) FROM results;")
rate=$(python3 - "$tmp/hipq.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
first, last, n = db.execute("SELECT MIN(started_at), MAX(finished_at), COUNT(*) FROM attempts WHERE state = 'done'").fetchone()
print(f"{n / (last - first):.0f}")
PY
)
echo "| hosts x workers | jobs | done | results (distinct) | jobs with 2+ results | jobs with 2+ done attempts | expired attempts | hosts / workers with results | jobs/s |"
echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |"
echo "| $hosts x $per_host | $n_jobs | $done_jobs | $n_results ($distinct) | $doubled | $two_done | $expired | $result_hosts / $result_workers | $rate |"
(( n_jobs == jobs_total )) || fail "expected $jobs_total jobs, found $n_jobs"
(( done_jobs == jobs_total )) || fail "only $done_jobs of $jobs_total jobs done"
(( n_results == jobs_total && distinct == jobs_total )) || fail "$n_results results for $distinct of $jobs_total jobs"
(( doubled == 0 && two_done == 0 )) || fail "a job ran to success twice ($doubled results, $two_done attempts)"
(( result_hosts == hosts )) || fail "results came from $result_hosts of $hosts hosts"
(( kill_n == 0 || expired >= 1 )) || fail "workers were killed but no lease expired"
echo "queue_netns_bench: exactly once held"
