#!/bin/bash
# exec_catalogue.sh BIN BACKEND [cases] [seeds] [workers] [seconds]: the catalogue on a slow
# backend (an exec: child whose kernel compiles per shape, e.g. python/examples/torch_flex.py) as
# many small runs of pacts-conformance, one per (property, seed), `workers` at a time, each of
# `cases` generated cases, started until `seconds` have passed. A run that ends writes its JSON
# record (a run cut off writes none, so small runs lose little); the counts are then added up per
# property by catalogue_summary.py. Writes to $OUT (default /tmp/pacts-out): json/, logs/,
# failures/, runs.txt, summary.txt.
#   tools/gpu/exec_catalogue.sh build/conformance "exec:python3 python/examples/torch_flex.py" 8 901-916 14 480
set -u
BIN=$1; BACKEND=$2; CASES=${3:-8}; SEEDS=${4:-901-908}; WORKERS=${5:-8}; SECONDS_LEFT=${6:-300}
O=${OUT:-/tmp/pacts-out}; mkdir -p "$O/json" "$O/logs" "$O/failures"
first=${SEEDS%-*}; last=${SEEDS#*-}
deadline=$(( $(date +%s) + SECONDS_LEFT ))
props=$(grep -oE 'PACTS-(ACC|POISON|META|EDGE|DEV|REFUSE)-[0-9]+' spec/properties.md | sort -uV | grep -v DEV-2)
one() {  # one property and seed, unless the deadline has passed; no run outlives the deadline
  local p=$1 s=$2 now left
  now=$(date +%s); left=$(( deadline - now ))
  if (( left <= 0 )); then echo "$p seed $s skipped (deadline)"; return; fi
  timeout "$left" "$BIN/pacts-conformance" --backend "$BACKEND" --cases "$CASES" --seed "$s" \
    --gtest_filter="${p//-/_}_*" --case-dir "$O/failures/$p-$s" \
    --gtest_output="json:$O/json/$p-$s.json" > "$O/logs/$p-$s.log" 2>&1
  echo "$p seed $s rc=$? $(( $(date +%s) - now )) s"
}
export -f one; export BIN BACKEND CASES O deadline
# shellcheck disable=SC2016  # $0 and $1 are the inner shell's: one property and seed per run
for s in $(seq "$first" "$last"); do for p in $props; do echo "$p $s"; done; done |
  xargs -P "$WORKERS" -n 2 bash -c 'one "$0" "$1"' > "$O/runs.txt"
echo "runs: $(grep -c 'rc=0' "$O/runs.txt") passed, $(grep -c 'rc=1 ' "$O/runs.txt") failed, $(grep -cE 'rc=(124|137) ' "$O/runs.txt") cut off, $(grep -c skipped "$O/runs.txt") not started"
shopt -s nullglob
records=("$O"/json/*.json)
if (( ${#records[@]} == 0 )); then echo "no run ended: no counts"; exit 1; fi
python3 "$(dirname "$0")/catalogue_summary.py" "${records[@]}" | tee "$O/summary.txt"
