#!/usr/bin/env bash
# Faults on a real GPU worker (docs/reliability.md, "On the GPU"):
#
#   tools/bench/gpu_fault_run.sh HIPQ_BINARY OUTDIR
#
# One coordinator and one worker on GPU 0 (restarted by this script whenever it
# dies, under a new id), a batch of JOBS real jobs (SDXL architecture, synthetic
# weights exported once, SIZE px, STEPS Euler steps, fp16), and:
#  - KILLS times: wait until the worker reports denoise step >= 2 of a job, SIGKILL
#    it, then read the device's used memory once the process is gone, against the
#    baseline read before the first worker started;
#  - then another process (PyTorch) takes all but HOG_LEFT_MIB (256) of the device's
#    free memory and one more job, OOM_SIZE (8192) px square, is submitted (the
#    worker's pool, sized by the jobs before, cannot hold it: a 2048 px job still
#    fitted in what the worker held after 20 jobs of 1024 px): it must fail with an out-of-memory
#    reason (after the engine's one retry with its weights freed), and the worker
#    must live on.
# Then every job must be accounted for: the JOBS jobs done exactly once (no job
# with two results or two done attempts), the large job failed, none left queued
# or leased. The batch allows KILLS + 3 attempts, since one job may be hit by
# every kill.
# Prints one `figures:` line; exits 1 when a promise does not hold.
# Env: JOBS (20), KILLS (5), SIZE (1024), STEPS (20), OOM_SIZE (8192), HOG_LEFT_MIB (256), SYNTHETIC
# (sdxl; tiny-sdxl with BACKEND=cpu for a dry run without a GPU), BACKEND (hip),
# WORKDIR (/tmp/hipq-gpu-faults), MODEL (a diffusers folder to use instead of the
# export), MEMORY_SLACK_MIB (64: what "back to baseline" allows).
set -euo pipefail
hipq="$(realpath "${1:?usage: gpu_fault_run.sh HIPQ_BINARY OUTDIR}")"
out="$(mkdir -p "${2:?usage: gpu_fault_run.sh HIPQ_BINARY OUTDIR}" && realpath "$2")"
jobs="${JOBS:-20}"; oom_size="${OOM_SIZE:-8192}"; kills="${KILLS:-5}"; size="${SIZE:-1024}"; steps="${STEPS:-20}"
synthetic="${SYNTHETIC:-sdxl}"; backend="${BACKEND:-hip}"
work="${WORKDIR:-/tmp/hipq-gpu-faults}"; slack="${MEMORY_SLACK_MIB:-64}"
mkdir -p "$work"
stamp() { echo "[$(date +%H:%M:%S)] $*"; }
used_mib() {  # device memory in use on GPU 0 (MiB) by the CUDA driver's count, or 0 without one (cpu dry run)
  # nvidia-smi reads 0 in some containers; the driver's cuMemGetInfo does not. The
  # figure includes this probe's own context, the same at every reading.
  python3 - <<'PY' 2>/dev/null || echo 0
import ctypes
c = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
free, total = ctypes.c_size_t(), ctypes.c_size_t()
ok = (c.cuInit(0) == 0 and c.cuDeviceGet(ctypes.byref(dev), 0) == 0
      and c.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and c.cuCtxSetCurrent(ctx) == 0
      and c.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0)
print((total.value - free.value) >> 20 if ok else 0)
PY
}

model="${MODEL:-$work/$synthetic}"
if [[ ! -f "$model/model_index.json" ]]; then
  stamp "exporting synthetic:$synthetic (f16) to $model"
  "$hipq" weights export "synthetic:$synthetic" --out "$model" --dtype f16 > "$out/export.log" 2>&1 \
    || { cat "$out/export.log"; exit 1; }
fi

db="$out/faults.db"
rm -f "$db" "$db"-wal "$db"-shm
rm -rf "$work/images" "$work/stop"
ep_file="$work/endpoint"
rm -f "$ep_file"
"$hipq" coordinator --db "$db" --bind 'tcp://127.0.0.1:*' --endpoint-file "$ep_file" > "$out/coordinator.log" 2>&1 &
coord=$!
worker_pid=""
cleanup() {
  touch "$work/stop"
  [[ -n "$worker_pid" ]] && kill -9 "$worker_pid" 2>/dev/null || true
  kill "$coord" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -s "$ep_file" ]] && break; sleep 0.1; done
ep="$(cat "$ep_file")"
export HIPQ_CONNECT="$ep"

baseline="$(used_mib)"
stamp "coordinator at $ep; device memory in use before any worker: $baseline MiB"

seeds=$(seq -s, 0 $(( jobs - 1 )))
cat > "$out/batch.yaml" <<YAML
batch: gpu-faults
model: $model
max_attempts: $(( kills + 3 ))
defaults: {width: $size, height: $size, steps: $steps, guidance: 5.0, sampler: euler, precision: fp16,
           seeds: [$seeds]}
outputs: {directory: $work/images, save: [latent, png, timings]}
prompts:
  - a photograph of an astronaut riding a horse
YAML
cat > "$out/oom.yaml" <<YAML
batch: gpu-faults-oom
model: $model
max_attempts: 1
defaults: {width: $oom_size, height: $oom_size, steps: 2, guidance: 5.0, sampler: euler, precision: fp16, seeds: [0]}
outputs: {directory: $work/images-oom, save: [latent]}
prompts:
  - far too large for the device
YAML
"$hipq" submit "$out/batch.yaml" > "$out/submit.log" 2>&1 || { cat "$out/submit.log"; exit 1; }

start_worker() {
  "$hipq" worker --device 0 --backend "$backend" >> "$out/worker.log" 2>&1 &
  worker_pid=$!
}
worker_step() {  # denoise step of the current worker process (its id ends in /PID), or -1
  "$hipq" workers --format json 2>/dev/null | python3 -c '
import json, sys
pid = sys.argv[1]
w = [x for x in json.load(sys.stdin).get("workers", [])
     if x.get("worker_id", "").endswith("/" + pid) and x.get("running_job_id")]
print(max([x.get("progress_step") or 0 for x in w], default=-1))' "$worker_pid" 2>/dev/null || echo -1
}
open_jobs() {  # jobs not yet in a final state, over both batches
  "$hipq" status --format json | python3 -c '
import json, sys
b = json.load(sys.stdin)["batches"]
print(sum(x["by_state"].get("queued", 0) + x["by_state"].get("leased", 0) for x in b))'
}

start_worker
killed=0; after_kill=()
t_start=$(date +%s)
while (( killed < kills )); do
  (( $(date +%s) - t_start > 1800 )) && { echo "gave up waiting for a job to kill"; break; }
  if ! kill -0 "$worker_pid" 2>/dev/null; then start_worker; fi
  if (( $(worker_step) >= 2 )); then
    kill -9 "$worker_pid"
    wait "$worker_pid" 2>/dev/null || true
    killed=$(( killed + 1 ))
    t_kill=$(date +%s.%N)
    for _ in $(seq 20); do  # the driver frees a dead process's memory within moments
      m="$(used_mib)"
      (( m <= baseline + slack )) && break
      sleep 0.5
    done
    after_kill+=("$m")
    stamp "kill $killed: worker SIGKILLed mid-denoise; device memory in use $m MiB (baseline $baseline)" \
      "$(python3 -c "import sys, time; print('%.1f s after the kill' % (time.time() - float(sys.argv[1])))" "$t_kill")"
    start_worker
  fi
  sleep 0.2
done
stamp "waiting for the batch to finish"
while (( $(open_jobs) > 0 )); do
  (( $(date +%s) - t_start > 3000 )) && { echo "the batch did not finish"; break; }
  if ! kill -0 "$worker_pid" 2>/dev/null; then start_worker; fi
  sleep 1
done
# The out-of-memory job: another process takes all but HOG_LEFT_MIB of the device's
# free memory (PyTorch), then one more job is submitted; it must fail saying so.
stamp "another process takes the device's free memory; submitting one more job"
hog_flag="$work/hog.ready"; rm -f "$hog_flag"
python3 -c '
import sys, time, torch
free, _ = torch.cuda.mem_get_info()
x = torch.empty(free - int(sys.argv[2]) * 2**20, dtype=torch.uint8, device="cuda")
open(sys.argv[1], "w").write("%d\n" % x.numel())
time.sleep(600)' "$hog_flag" "${HOG_LEFT_MIB:-256}" > "$out/hog.log" 2>&1 &
hog=$!
# The job goes in only once the memory is taken (importing torch takes a while).
for _ in $(seq 1200); do [[ -s "$hog_flag" ]] && break; kill -0 "$hog" 2>/dev/null || break; sleep 0.1; done
if [[ ! -s "$hog_flag" ]]; then
  echo "the memory-taking process did not get the memory:"; cat "$out/hog.log"; exit 1
fi
# (No used_mib reading here: with the device full the probe cannot make its own context.)
stamp "another process holds $(( $(cat "$hog_flag") >> 20 )) MiB, all but ${HOG_LEFT_MIB:-256} MiB of the free memory"
"$hipq" submit "$out/oom.yaml" >> "$out/submit.log" 2>&1 || { cat "$out/submit.log"; exit 1; }
while (( $(open_jobs) > 0 )); do
  (( $(date +%s) - t_start > 3000 )) && { echo "the out-of-memory job did not finish"; break; }
  if ! kill -0 "$worker_pid" 2>/dev/null; then echo "the worker died on the out-of-memory job"; start_worker; fi
  sleep 0.5
done
kill "$hog" 2>/dev/null || true
wait "$hog" 2>/dev/null || true
kill -0 "$worker_pid" 2>/dev/null && stamp "the worker is alive after the out-of-memory job"
"$hipq" status > "$out/status.txt" 2>&1 || true
"$hipq" runs --db "$db" > "$out/runs.txt" 2>&1 || true
cat "$out/status.txt"
kill -9 "$worker_pid" 2>/dev/null || true
wait "$worker_pid" 2>/dev/null || true
sleep 1
final_mem="$(used_mib)"

# Accounting from the database itself (docs/schema.md): jobs, attempts, results.
python3 - "$db" "$jobs" "$kills" "$killed" "$baseline" "$slack" "$final_mem" "${after_kill[@]}" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
jobs, kills, killed, baseline, slack, final_mem = (int(x) for x in sys.argv[2:8])
after = [int(x) for x in sys.argv[8:]]
def q(sql, *args):
    return db.execute(sql, args).fetchall()
main = q("SELECT j.id, j.state FROM jobs j JOIN batches b ON b.id = j.batch_id WHERE b.name = 'gpu-faults' ORDER BY j.id")
done = [i for i, st in main if st == "done"]
with_result = q("SELECT COUNT(*), COUNT(DISTINCT r.job_id) FROM results r JOIN jobs j ON j.id = r.job_id "
                "JOIN batches b ON b.id = j.batch_id WHERE b.name = 'gpu-faults'")[0]
done_attempts = q("SELECT a.job_id, COUNT(*) FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN batches b "
                  "ON b.id = j.batch_id WHERE b.name = 'gpu-faults' AND a.state = 'done' GROUP BY a.job_id "
                  "HAVING COUNT(*) > 1 ORDER BY a.job_id")
expired = q("SELECT COUNT(*) FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN batches b ON b.id = j.batch_id "
            "WHERE b.name = 'gpu-faults' AND a.state = 'expired'")[0][0]
oom = q("SELECT j.state, COALESCE(a.error, '') FROM jobs j JOIN batches b ON b.id = j.batch_id "
        "LEFT JOIN attempts a ON a.job_id = j.id WHERE b.name = 'gpu-faults-oom' ORDER BY a.attempt")
lost = jobs - len(done)
doubled = (with_result[0] - with_result[1]) + len(done_attempts)
oom_reason = " | ".join(e for _, e in oom)
oom_ok = bool(oom) and all(st in ("failed", "dead") for st, _ in oom) and "out of memory" in oom_reason.lower()
over = [m for m in after + [final_mem] if m > baseline + slack]
print(f"figures: jobs {jobs}, kills {killed}/{kills} mid-denoise, leases expired {expired}, done {len(done)}, "
      f"lost {lost}, doubled {doubled}; oom job: {'failed, out of memory' if oom_ok else 'NOT as promised'} "
      f"({oom_reason[:200]}); device MiB: baseline {baseline}, after each kill {after}, at the end {final_mem}")
sys.exit(0 if (lost == 0 and doubled == 0 and oom_ok and killed == kills and not over) else 1)
PY
