#!/usr/bin/env bash
# Where a zero-work job's CPU goes (not a test): the setting of queue_bench.sh (a
# coordinator, N SleepEngine workers with `--engine sleep:0`, one batch of JOBS jobs),
# and the CPU time (utime + stime from /proc) each process and each of its threads
# spent while the batch ran, divided by the jobs: microseconds of CPU per job, for the
# coordinator and for all workers together, by thread (the worker's connection loop,
# its job thread, ZeroMQ's I/O thread, ...).
# PERF=1 also records the workers with `perf record --call-graph dwarf` (OUT/workers.perf)
# and the coordinator (OUT/coordinator.perf); read them with `perf report -i FILE`.
# Usage: tools/bench/queue_profile.sh [HIPQ_BINARY] [JOBS] [WORKERS] [OUT]
#   e.g. tools/bench/queue_profile.sh build/cli/hipq 10000 64 /tmp/qprof
# WORKER_ARGS: extra `hipq worker` flags (e.g. "--credit 1").
set -euo pipefail
HIPQ=$(readlink -f "${1:-build/cli/hipq}")
JOBS=${2:-10000}
WORKERS=${3:-64}
OUT=${4:-$(mktemp -d)}
mkdir -p "$OUT"
dir=$(mktemp -d)
prompts=$(( (JOBS + 9) / 10 ))
{
  echo "batch: bench"
  echo "model: synthetic:tiny-sdxl"
  echo "defaults: {width: 64, height: 64, steps: 1, seeds: {from: 0, count: 10}}"
  echo "parity: {golden: none}"
  echo "outputs: {directory: out, save: [latent]}"
  echo "prompts:"
  for ((i = 0; i < prompts; i++)); do echo "  - bench prompt $i"; done
} > "$dir/bench.yaml"
"$HIPQ" --log-level warn coordinator --db "$dir/hipq.db" --bind 'tcp://127.0.0.1:*' \
    --endpoint-file "$dir/endpoint" > "$dir/coord.log" 2>&1 &
coord=$!
for _ in $(seq 100); do [ -s "$dir/endpoint" ] && break; sleep 0.05; done
ep=$(cat "$dir/endpoint")
pids=()
for ((w = 0; w < WORKERS; w++)); do
  # shellcheck disable=SC2086
  "$HIPQ" --log-level error worker --connect "$ep" --engine sleep:0 --backend cpu --id "w$w" \
      ${WORKER_ARGS:-} > "$dir/w$w.log" 2>&1 &
  pids+=($!)
done
sleep 2

# "<pid> <tid> <comm> <utime+stime ticks>" for every thread of the given processes.
snapshot() {
  python3 - "$@" <<'PY'
import os, sys
for pid in sys.argv[1:]:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        continue
    for tid in tids:
        try:
            s = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]  # may hold spaces
        f = s[s.rindex(")") + 2:].split()
        print(pid, tid, comm.replace(" ", "_"), int(f[11]) + int(f[12]))
PY
}

snapshot "$coord" "${pids[@]}" > "$OUT/before.txt"
perfs=()
if [ "${PERF:-0}" = 1 ]; then
  perf record -q -F 499 --call-graph dwarf,16384 -o "$OUT/workers.perf" -p "$(IFS=,; echo "${pids[*]}")" \
      > "$OUT/perf-workers.log" 2>&1 &
  perfs+=($!)
  perf record -q -F 499 --call-graph dwarf,16384 -o "$OUT/coordinator.perf" -p "$coord" \
      > "$OUT/perf-coordinator.log" 2>&1 &
  perfs+=($!)
  sleep 1
fi
start=$(date +%s.%N)
"$HIPQ" --log-level warn submit "$dir/bench.yaml" --connect "$ep" --wait --timeout 60 > "$dir/submit.log" 2>&1
end=$(date +%s.%N)
snapshot "$coord" "${pids[@]}" > "$OUT/after.txt"
for p in ${perfs[@]+"${perfs[@]}"}; do kill -INT "$p" 2>/dev/null || true; done
for p in ${perfs[@]+"${perfs[@]}"}; do wait "$p" 2>/dev/null || true; done
kill "${pids[@]}" 2>/dev/null || true
kill "$coord" 2>/dev/null || true
wait 2>/dev/null || true
python3 - "$OUT/before.txt" "$OUT/after.txt" "$coord" "$JOBS" "$start" "$end" "$(getconf CLK_TCK)" <<'PY'
import collections, sys
before, after, coord, jobs, start, end, hz = sys.argv[1:]
jobs, hz = int(jobs), int(hz)
def load(path):
    out = {}
    for line in open(path):
        pid, tid, comm, ticks = line.split()
        out[(pid, tid)] = (comm, int(ticks))
    return out
b, a = load(before), load(after)
by = collections.defaultdict(float)
for key, (comm, ticks) in a.items():
    who = "coordinator" if key[0] == coord else "workers"
    # Threads of one role share a name pattern; ZeroMQ names its own (ZMQbg/...).
    name = comm if key[0] != key[1] else "main (connection loop)" if who == "workers" else "main (poll loop)"
    by[(who, name)] += (ticks - b.get(key, (comm, 0))[1]) / hz
wall = float(end) - float(start)
print(f"jobs {jobs}, wall {wall:.2f} s (submit included), {jobs / wall:.0f} jobs/s")
print("| process | thread | CPU s | µs / job |")
print("| --- | --- | ---: | ---: |")
tot = collections.defaultdict(float)
for (who, name), s in sorted(by.items()):
    tot[who] += s
    print(f"| {who} | {name} | {s:.2f} | {s / jobs * 1e6:.0f} |")
for who, s in sorted(tot.items()):
    print(f"| {who} | all | {s:.2f} | {s / jobs * 1e6:.0f} |")
PY
echo "(files in $OUT)"
rm -rf "$dir"
