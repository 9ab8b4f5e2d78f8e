#!/usr/bin/env bash
# Repository.StandsAlone: a clone is complete by itself. Fails when a tracked
# file refers to a folder beside the checkout (the parent's "shared" folder)
# or when the data the build, tests and examples read is missing.
#   tests/repo/stands_alone.sh SOURCE_DIR
set -euo pipefail
src="${1:?usage: stands_alone.sh SOURCE_DIR}"
cd "$src"
fail=0
# The pattern is built from pieces so that this file does not match itself.
sibling="\.\./""shared"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  hits=$(git grep -n -I -E "$sibling" -- . || true)
else
  hits=$(grep -rn -I -E "$sibling" --exclude-dir=.git --exclude-dir='build*' . || true)
fi
if [[ -n "$hits" ]]; then
  echo "stands_alone: tracked files refer to a folder outside the repository:" >&2
  echo "$hits" >&2
  echo "stands_alone: data the project needs lives under data/ (data/README.md)" >&2
  fail=1
fi
for f in data/clip/bpe_simple_vocab_16e6.txt.gz data/clip/LICENSE \
         data/prompts/PartiPrompts.tsv data/prompts/PartiPrompts.LICENSE data/README.md; do
  [[ -s "$f" ]] || { echo "stands_alone: missing $f" >&2; fail=1; }
done
if [[ -f data/clip/bpe_simple_vocab_16e6.txt.gz ]] && ! gzip -t data/clip/bpe_simple_vocab_16e6.txt.gz; then
  echo "stands_alone: data/clip/bpe_simple_vocab_16e6.txt.gz is not a valid gzip file" >&2; fail=1
fi
[[ $fail == 0 ]] && echo "stands_alone: ok"
exit $fail
