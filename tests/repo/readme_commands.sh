#!/usr/bin/env bash
# Repository.ReadmeCommandsRun: every `hipq ...` line in the README's sh blocks
# runs as printed, with the real binary in a temporary folder holding a copy of
# examples/. Lines that need other machines (`hipq coordinator` binding all
# interfaces with keys, `hipq worker --connect tcp://HOST...`) are checked
# against their command's --help instead: every flag they use must exist.
# `hipq submit` and `hipq status` run against a coordinator and a CPU worker
# this script starts on a free loopback port (HIPQ_CONNECT).
#   tests/repo/readme_commands.sh SOURCE_DIR HIPQ_EXE
set -uo pipefail
src="${1:?usage: readme_commands.sh SOURCE_DIR HIPQ_EXE}"
exe="${2:?usage: readme_commands.sh SOURCE_DIR HIPQ_EXE}"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/bin"
ln -s "$(realpath "$exe")" "$tmp/bin/hipq"
export PATH="$tmp/bin:$PATH"
cp -r "$src/examples" "$tmp/examples"
cd "$tmp" || exit 1
unset HIPQ_DB HIPQ_CONNECT HIPQ_KEY HIPQ_SERVER_KEY

# The README's manifest.yaml: any valid manifest; a small one for the CPU.
cat > manifest.yaml <<'YAML'
batch: readme
model: synthetic:tiny-sdxl
defaults: {width: 64, height: 64, steps: 2, seeds: [0, 1]}
parity: {golden: none}
outputs: {directory: queue-out}
prompts: [a lighthouse]
YAML
hipq coordinator --db queue.db --bind 'tcp://127.0.0.1:*' --endpoint-file endpoint >coordinator.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s endpoint ]] && break; sleep 0.1; done
[[ -s endpoint ]] || { echo "readme_commands: the coordinator did not start" >&2; cat coordinator.log >&2; exit 1; }
export HIPQ_CONNECT=$(cat endpoint)
hipq worker --backend cpu >worker.log 2>&1 &
pids+=($!)

mapfile -t lines < <(awk '/^```sh/{on=1; next} /^```/{on=0} on && /^hipq /{print}' "$src/README.md" |
                     sed -E 's/[[:space:]]+#[^"]*$//')
(( ${#lines[@]} >= 10 )) || { echo "readme_commands: found only ${#lines[@]} hipq lines in README.md" >&2; exit 1; }
fail=0
for line in "${lines[@]}"; do
  sub=$(awk '{print $2}' <<<"$line")
  if [[ "$sub" == coordinator || "$sub" == worker ]]; then
    help=$(hipq "$sub" --help)
    for flag in $(grep -oE '(^| )--[a-z][a-z0-9-]*' <<<"$line"); do
      if ! grep -qE -- "(^| )$flag( |,|$)" <<<"$help"; then
        echo "readme_commands: '$line': hipq $sub has no flag $flag" >&2
        fail=1
      fi
    done
    echo "checked flags: $line"
    continue
  fi
  start=$(date +%s%N)
  bash -c "$line" >out.log 2>err.log
  code=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  # compare's exit status is its verdict: 3 = slower (timing noise between two CPU batches).
  if [[ $code -ne 0 && ! ( "$sub" == compare && $code -eq 3 ) ]]; then
    echo "readme_commands: '$line' exited $code" >&2
    tail -n 20 out.log err.log >&2
    fail=1
  fi
  printf 'ran (%d ms, exit %d): %s\n' "$took_ms" "$code" "$line"
done
exit $fail
