#!/usr/bin/env bash
# Checks the deployment files: shellcheck (Slurm scripts, project and bench scripts),
# systemd-analyze verify (units, in a private root holding the built binary),
# and the offline Kubernetes consistency check (with a negative control).
#   tests/deploy/check_deploy.sh HIPQ_BINARY
set -euo pipefail
root_dir="$(cd "$(dirname "$0")/../.." && pwd)"
hipq_bin="${1:?usage: check_deploy.sh HIPQ_BINARY}"
fail=0

echo "== shellcheck (severity warning and above)"
shellcheck --severity=warning "$root_dir"/deploy/slurm/*.sbatch "$root_dir"/scripts/* "$root_dir"/.ci/run "$root_dir"/tests/deploy/*.sh \
  "$root_dir"/tools/bench/*.sh \
  && echo "shellcheck: ok" || fail=1

echo "== systemd-analyze verify"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/usr/local/bin" "$tmp/etc/systemd/system" "$tmp/usr/lib"
cp "$hipq_bin" "$tmp/usr/local/bin/hipq"
cp "$root_dir"/deploy/systemd/*.service "$tmp/etc/systemd/system/"
cp -r /usr/lib/systemd "$tmp/usr/lib/"
ln -s usr/lib "$tmp/lib"
if out="$(systemd-analyze verify --root="$tmp" --man=no hipq-coordinator.service hipq-worker@0.service 2>&1)" \
   && [[ -z "$out" ]]; then
  echo "systemd-analyze verify: ok (hipq-coordinator.service, hipq-worker@0.service)"
else
  echo "$out"; fail=1
fi

echo "== kubernetes manifests"
python3 "$root_dir/tests/deploy/check_k8s.py" "$root_dir/deploy/k8s" || fail=1
# Negative control: a broken copy must be rejected.
mkdir -p "$tmp/k8s-broken"
cp "$root_dir"/deploy/k8s/*.yaml "$tmp/k8s-broken/"
sed -i 's/nvidia.com\/gpu: 1/cpu: "1"/; s/port: zmq/port: zeromq/' "$tmp/k8s-broken/workers-nvidia.yaml" "$tmp/k8s-broken/coordinator.yaml"
if python3 "$root_dir/tests/deploy/check_k8s.py" "$tmp/k8s-broken" >"$tmp/neg.txt"; then
  echo "check_k8s accepted a broken manifest set:"; cat "$tmp/neg.txt"; fail=1
else
  echo "check_k8s negative control: rejected as expected ($(grep -c ': ' "$tmp/neg.txt") lines)"
fi

if (( fail )); then echo "deploy checks: FAILED"; exit 1; fi
echo "deploy checks: passed"
