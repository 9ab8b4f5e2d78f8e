#!/usr/bin/env bash
# Slurm test: a one-node Slurm cluster on this machine (munged, slurmctld and
# slurmd from Debian's slurm-wlm and munge, configured here in a temporary
# folder, nothing of the system's configuration touched) runs the two batch
# scripts of deploy/slurm/ as a user would submit them: hipq-workers.sbatch
# (one worker per allocated GPU through srun) and hipq-worker-array.sbatch (a
# job array, one worker per element). The node advertises GPUs as GRES backed
# by placeholder device files and the workers run the CPU backend
# (HIPQ_BACKEND=cpu), so no GPU is needed. For each script: the workers start
# under Slurm, connect to a CurveZMQ coordinator, finish a small batch with
# every job's result recorded exactly once, and `scancel` drains them — each
# worker says goodbye, its Slurm job leaves the queue and no worker process
# is left.
#   slurm_test.sh HIPQ_BINARY SOURCE_DIR
# Exit 77 (ctest SKIP) without root or without the packages
# (apt-get install -y slurm-wlm munge, or scripts/setup --slurm).
set -euo pipefail
hipq="$(realpath "${1:?usage: slurm_test.sh HIPQ_BINARY SOURCE_DIR}")"
src="$(realpath "${2:?usage: slurm_test.sh HIPQ_BINARY SOURCE_DIR}")"
if (( EUID != 0 )); then echo "SKIP: the Slurm daemons of this test run as root"; exit 77; fi
for tool in munged slurmctld slurmd sbatch srun squeue scancel scontrol sqlite3; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: '$tool' is not installed (apt-get install -y slurm-wlm munge sqlite3, or scripts/setup --slurm)"
    exit 77
  fi
done

tmp="$(mktemp -d)"
chmod 700 "$tmp"
pids=()
cleanup() {
  if [[ -n "${SLURM_CONF:-}" ]]; then scancel --quiet --full "--partition=hipq" 2>/dev/null || true; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [[ "${KEEP_TMP:-}" == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log "$tmp"/out/*.out; do [[ -f "$f" ]] && { echo "--- $f"; tail -n 25 "$f"; }; done
  exit 1
}
# A free TCP port on 127.0.0.1: nothing answers a connect to it.
free_port() {
  local p
  for _ in $(seq 50); do
    p=$(( 20000 + RANDOM % 20000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  fail "no free port"
}
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local until=$(( SECONDS + $1 )) what="$2"; shift 2
  until "$@"; do (( SECONDS < until )) || fail "timed out waiting for $what"; sleep 0.3; done
}

# ---- munge ---------------------------------------------------------------------------------
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge.key"
munged --foreground --force --key-file="$tmp/munge.key" --socket="$tmp/munge.socket" \
  --pid-file="$tmp/munged.pid" --seed-file="$tmp/munge.seed" --log-file="$tmp/munged.log" \
  > "$tmp/munged-stdout.log" 2>&1 &
pids+=($!)
wait_for 20 "munged's socket" test -S "$tmp/munge.socket"

# ---- slurm ---------------------------------------------------------------------------------
host="$(hostname -s)"
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/out"
for i in 0 1 2 3; do : > "$tmp/gpu$i"; done
ctld_port="$(free_port)"; slurmd_port="$(free_port)"
export SLURM_CONF="$tmp/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=hipqtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=30
NodeName=hipqnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=1024 Gres=gpu:4 State=UNKNOWN
PartitionName=hipq Nodes=hipqnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
cat > "$tmp/gres.conf" <<CONF
NodeName=hipqnode Name=gpu File=$tmp/gpu[0-3]
CONF
slurmctld -D -c -f "$SLURM_CONF" > "$tmp/slurmctld-stdout.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N hipqnode > "$tmp/slurmd-stdout.log" 2>&1 &
pids+=($!)
node_idle() { scontrol show node hipqnode 2>/dev/null | grep -q "State=IDLE"; }
wait_for 60 "node hipqnode to be IDLE ($(scontrol show node hipqnode 2>&1 | grep -o 'State=[^ ]*' || true))" node_idle
echo "slurm: node hipqnode idle (slurmctld on port $ctld_port)"

# ---- keys and coordinator --------------------------------------------------------------------
mkdir -p "$tmp/keys"
"$hipq" keygen "$tmp/keys/server" > /dev/null
: > "$tmp/keys/authorized_keys"
for name in worker client; do
  "$hipq" keygen "$tmp/keys/$name" > "$tmp/keygen-$name.txt"
  echo "$(sed -n 3p "$tmp/keygen-$name.txt") $name worker,client" >> "$tmp/keys/authorized_keys"
done
"$hipq" coordinator --db "$tmp/hipq.db" --bind "tcp://127.0.0.1:*" --server-key "$tmp/keys/server" \
  --authorized-keys "$tmp/keys/authorized_keys" --endpoint-file "$tmp/endpoint" > "$tmp/coordinator.log" 2>&1 &
pids+=($!)
wait_for 20 "the coordinator's endpoint" test -s "$tmp/endpoint"
ep="$(cat "$tmp/endpoint")"
client=(--connect "$ep" --key "$tmp/keys/client" --server-key "$tmp/keys/server.pub")
sql() { sqlite3 -readonly "$tmp/hipq.db" "$1"; }

export HIPQ_COORDINATOR="$ep" HIPQ_BIN="$hipq" HIPQ_KEY="$tmp/keys/worker" \
  HIPQ_SERVER_KEY="$tmp/keys/server.pub" HIPQ_BACKEND=cpu

# run_case NAME JOBS WORKERS SBATCH_ARGS...: a batch of JOBS tiny jobs, the script submitted
# with sbatch, WORKERS distinct workers connected, the batch done exactly once, then
# scancel and the drain checked.
run_case() {
  local name="$1" jobs="$2" want_workers="$3"; shift 3
  cat > "$tmp/$name.yaml" <<YAML
batch: $name
model: synthetic:tiny-sd15
defaults: {width: 64, height: 64, steps: 2, seeds: {from: 0, count: $jobs}}
parity: {golden: none}
outputs: {directory: out-$name, save: [png, timings]}
prompts: [a lighthouse at dawn]
YAML
  "$hipq" submit "$tmp/$name.yaml" "${client[@]}" > "$tmp/submit-$name.log" 2>&1 || fail "submit $name"
  local batch
  batch="$(sql "SELECT id FROM batches WHERE name = '$name';")"
  local job
  job="$(sbatch --parsable --chdir="$tmp" "$@" 2> "$tmp/sbatch-$name.log")" || fail "sbatch $name: $(cat "$tmp/sbatch-$name.log")"
  job="${job%%;*}"
  echo "$name: batch $batch, slurm job $job"
  finished() { [[ "$(sql "SELECT COUNT(*) FROM jobs WHERE batch_id = $batch AND state NOT IN ('done');")" == 0 ]]; }
  wait_for 150 "batch $name to finish ($(sql "SELECT state, COUNT(*) FROM jobs WHERE batch_id = $batch GROUP BY state;" | tr '\n' ' '))" finished
  local results attempts
  results="$(sql "SELECT COUNT(*) FROM results r JOIN attempts a ON a.id = r.attempt_id JOIN jobs j ON j.id = a.job_id WHERE j.batch_id = $batch;")"
  attempts="$(sql "SELECT COUNT(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch_id = $batch;")"
  [[ "$results" == "$jobs" ]] || fail "$name: $results results for $jobs jobs"
  [[ "$attempts" == "$jobs" ]] || fail "$name: $attempts attempts for $jobs jobs (each job should run once)"
  local others workers
  others="$(sql "SELECT COUNT(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch_id = $batch AND a.worker_id NOT LIKE 'slurm-$job-%';")"
  [[ "$others" == 0 ]] || fail "$name: $others job(s) ran on workers not named after Slurm job $job: $(sql "SELECT DISTINCT worker_id FROM attempts;")"
  connected() { [[ "$(sql "SELECT COUNT(*) FROM workers WHERE id LIKE 'slurm-$job-%';")" == "$want_workers" ]]; }
  wait_for 30 "$want_workers distinct workers of Slurm job $job to connect ($(sql "SELECT id FROM workers WHERE id LIKE 'slurm-$job-%';" | tr '\n' ' '))" connected
  workers="$(sql "SELECT COUNT(DISTINCT a.worker_id) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch_id = $batch;")"
  echo "$name: $jobs jobs done once each by $workers of the $want_workers Slurm workers"

  scancel "$job"
  gone() { [[ -z "$(squeue --noheader --jobs="$job" 2>/dev/null)" ]]; }
  wait_for 60 "slurm job $job to leave the queue after scancel" gone
  no_workers() { ! pgrep -f -- "--connect $ep .*--id slurm-$job-" >/dev/null; }
  wait_for 30 "the workers of slurm job $job to exit" no_workers
  drained() { [[ "$(sql "SELECT COUNT(*) FROM workers WHERE id LIKE 'slurm-$job-%' AND state NOT IN ('gone', 'dead');")" == 0 ]]; }
  wait_for 20 "the coordinator to see the workers of $job leave ($(sql "SELECT id, state FROM workers WHERE id LIKE 'slurm-$job-%';" | tr '\n' ' '))" drained
  # Each left by draining (SIGTERM from scancel: finish the job, say goodbye), not by
  # missing heartbeats.
  local started left
  started="$(sql "SELECT COUNT(*) FROM workers WHERE id LIKE 'slurm-$job-%';")"
  left="$(grep -c "worker slurm-$job-[^ ]* left: drained" "$tmp/coordinator.log" || true)"
  [[ "$left" == "$started" ]] || fail "$name: $started worker(s) of job $job, $left left by draining"
  echo "$name: scancel drained the $started worker(s)"
}

run_case slurm-workers 6 2 --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=2 --time=10 \
  --output="$tmp/out/workers-%j.out" "$src/deploy/slurm/hipq-workers.sbatch"
run_case slurm-array 4 2 --array=0-1 --ntasks=1 --gpus=1 --cpus-per-task=1 --time=10 \
  --output="$tmp/out/array-%A_%a.out" "$src/deploy/slurm/hipq-worker-array.sbatch"
echo "PASS"
