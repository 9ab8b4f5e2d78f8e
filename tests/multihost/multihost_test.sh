#!/usr/bin/env bash
# Multi-host test: a coordinator and three "boxes", each a network namespace with
# its own address, joined by a bridge in a fourth ("switch") namespace. CurveZMQ
# is on (server key + allow-list). Each box runs one CPU worker (own UTS
# namespace, so its host name is the box's) on a tiny synthetic model. Mid-batch
# one box's link is taken down (its lease expires, the job is requeued) and
# brought back (its worker reconnects, any late result is dropped). The batch
# must complete with every job's result recorded exactly once, and `hipq stats
# --group-by host` must show all three hosts.
#   multihost_test.sh HIPQ_BINARY
# Exit 77 (ctest SKIP) without root or iproute2.
set -euo pipefail
hipq="$(realpath "${1:?usage: multihost_test.sh HIPQ_BINARY}")"
if (( EUID != 0 )); then echo "SKIP: network namespaces need root"; exit 77; fi
if ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then echo "SKIP: needs iproute2 and unshare"; exit 77; fi

p="hq$(( $$ % 100000 ))"
sw="${p}sw"; coord="${p}c"; boxes=("${p}b1" "${p}b2" "${p}b3")
net=10.203.$(( $$ % 200 + 20 ))
tmp="$(mktemp -d)"
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for ns in "$coord" "${boxes[@]}" "$sw"; do ip netns del "$ns" 2>/dev/null || true; done
  if [[ "${KEEP_TMP:-}" == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -n 30 "$f"; done; exit 1; }

# ---- network: switch namespace with a bridge; one veth per host ------------------
ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
ip -n "$sw" link set lo up
host_ns=("$coord" "${boxes[@]}")
for i in "${!host_ns[@]}"; do
  ns="${host_ns[$i]}"
  ip netns add "$ns"
  ip link add "${p}h$i" type veth peer name "${p}s$i"
  ip link set "${p}h$i" netns "$ns"
  ip link set "${p}s$i" netns "$sw"
  ip -n "$ns" link set "${p}h$i" name eth0
  ip -n "$ns" addr add "$net.$(( i + 1 ))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$sw" link set "${p}s$i" master br0
  ip -n "$sw" link set "${p}s$i" up
done
# Reachability without ping: a TCP connect to a closed port on the coordinator's
# address is answered at once with a reset ("refused") when the path works, and
# times out when it does not.
reach() { local out; out="$(ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1 || true)"; [[ "$out" == *refused* ]]; }
ok=0
for _ in $(seq 10); do reach "${boxes[0]}" "$net.1" && { ok=1; break; }; sleep 0.5; done
(( ok )) || fail "box 1 cannot reach the coordinator: $(ip netns exec "${boxes[0]}" timeout 3 bash -c "exec 3<>/dev/tcp/$net.1/9" 2>&1)"

# ---- keys -------------------------------------------------------------------------------
mkdir -p "$tmp/keys"
"$hipq" keygen "$tmp/keys/server" >/dev/null
: > "$tmp/keys/authorized_keys"
for name in box1 box2 box3 client; do
  "$hipq" keygen "$tmp/keys/$name" > "$tmp/keygen-$name.txt"
  pub="$(sed -n 3p "$tmp/keygen-$name.txt")"
  echo "$pub $name worker,client" >> "$tmp/keys/authorized_keys"
done
"$hipq" keygen "$tmp/keys/stranger" >/dev/null   # never authorised

# ---- coordinator (binds the namespace's address on any free port) ----------------------------
ip netns exec "$coord" "$hipq" coordinator --db "$tmp/hipq.db" --bind "tcp://$net.1:*" \
  --server-key "$tmp/keys/server" --authorized-keys "$tmp/keys/authorized_keys" \
  --endpoint-file "$tmp/endpoint" > "$tmp/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "$tmp/endpoint" ]] && break; sleep 0.1; done
[[ -s "$tmp/endpoint" ]] || fail "coordinator did not write its endpoint"
ep="$(cat "$tmp/endpoint")"
echo "coordinator at $ep"
client=(--connect "$ep" --key "$tmp/keys/client" --server-key "$tmp/keys/server.pub")

# An unknown key is refused.
if ip netns exec "${boxes[0]}" timeout 20 "$hipq" status --connect "$ep" --key "$tmp/keys/stranger" \
     --server-key "$tmp/keys/server.pub" > "$tmp/stranger.log" 2>&1; then
  fail "a client with an unlisted CURVE key was served"
fi
echo "unlisted CURVE key: refused"

# ---- workers: one per box, each with its own host name -----------------------------------------
for i in 1 2 3; do
  ns="${boxes[$(( i - 1 ))]}"
  ip netns exec "$ns" unshare --uts sh -c "hostname box$i && exec \"\$0\" \"\$@\"" \
    "$hipq" worker --connect "$ep" --key "$tmp/keys/box$i" --server-key "$tmp/keys/server.pub" \
    --backend cpu --id "box$i-cpu0" > "$tmp/worker$i.log" 2>&1 &
  pids+=($!)
done

# ---- the batch ---------------------------------------------------------------------------------
cat > "$tmp/manifest.yaml" <<YAML
batch: multihost
model: synthetic:tiny-sd15
defaults: {width: 64, height: 64, steps: 2, guidance: 5.0, sampler: euler, precision: fp32, seeds: [0, 1, 2, 3]}
parity: {golden: none}
outputs: {directory: out, save: [latent, png]}
prompts:
  - a lighthouse at dawn
  - a red cube on a blue sphere
  - a bowl of ramen, studio light
  - an old map of a coastline
  - a fox in the snow
  - a city skyline at night
YAML
jobs_total=24
ip netns exec "${boxes[0]}" "$hipq" submit "$tmp/manifest.yaml" "${client[@]}" > "$tmp/submit.log" 2>&1 \
  || fail "submit failed"
sql() { sqlite3 -readonly "$tmp/hipq.db" "$1"; }
results() { sql "SELECT COUNT(*) FROM results;"; }

# ---- mid-batch: cut box 2 off the network, then bring it back ---------------------------------
deadline=$(( SECONDS + 240 ))
until (( $(results) >= 6 )); do
  (( SECONDS < deadline )) || fail "no progress: $(results) results"
  sleep 0.2
done
ip -n "${boxes[1]}" link set eth0 down
echo "box2 link down after $(results) results"
sleep 6     # > 3 missed heartbeats: box 2's lease expires, its job goes back to the queue
expired=$(sql "SELECT COUNT(*) FROM attempts WHERE state = 'expired';")
ip -n "${boxes[1]}" link set eth0 up
echo "box2 link up again (attempts expired meanwhile: $expired)"

until [[ "$(sql "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'leased');")" == 0 ]]; do
  (( SECONDS < deadline )) || fail "batch did not finish: $(results) of $jobs_total results"
  sleep 0.5
done
# Give box 2 time to reconnect and deliver any late result (which must be dropped).
for _ in $(seq 60); do
  grep -q "box2" <(sql "SELECT w.host FROM workers w WHERE w.last_seen > strftime('%s','now') - 2;") && break
  sleep 0.5
done

# ---- verdict -------------------------------------------------------------------------------------
jobs=$(sql "SELECT COUNT(*) FROM jobs;")
done_jobs=$(sql "SELECT COUNT(*) FROM jobs WHERE state = 'done';")
n_results=$(results)
distinct=$(sql "SELECT COUNT(DISTINCT job_id) FROM results;")
lost=$(( jobs - distinct ))
doubled=$(( n_results - distinct ))
per_host=$(sql "SELECT w.host, COUNT(*) FROM results r JOIN workers w ON w.id = r.worker_id GROUP BY w.host ORDER BY w.host;")
hosts=$(sql "SELECT COUNT(DISTINCT w.host) FROM results r JOIN workers w ON w.id = r.worker_id;")
echo "summary: hosts=$hosts jobs=$jobs done=$done_jobs results=$n_results lost=$lost doubled=$doubled expired_attempts=$expired"
echo "per host:"; while IFS= read -r line; do echo "  $line"; done <<< "$per_host"
"$hipq" stats --db "$tmp/hipq.db" --group-by host > "$tmp/stats.txt" 2>&1 || fail "hipq stats failed"
cat "$tmp/stats.txt"

(( jobs == jobs_total )) || fail "expected $jobs_total jobs, found $jobs"
(( done_jobs == jobs_total )) || fail "only $done_jobs of $jobs_total jobs done"
(( lost == 0 )) || fail "$lost job(s) without a result"
(( doubled == 0 )) || fail "$doubled duplicate result(s)"
(( hosts == 3 )) || fail "results came from $hosts host(s), expected 3"
(( expired >= 1 )) || fail "box 2 went down but no lease expired"
for h in box1 box2 box3; do grep -q "$h" "$tmp/stats.txt" || fail "hipq stats --group-by host does not show $h"; done
echo "multihost: PASS"
