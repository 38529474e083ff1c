#!/bin/bash
# The release check of the HIP kernels on one GPU node (an H200), in one run of about 400 s:
# what a kernel change must show (every format and layout conformant, its speed, its mutants).
# Run from the repository root with a folder BIN holding the binaries of a Release CUDA build
# (pacts-conformance, pacts-fuzz, pacts-bench, libpacts_bench_unsafe.so, pacts-qualify,
# libpacts_kernels_hip.so, and pacts-mutate-hip from a -DPACTS_ENABLE_CUDA=ON build's mutation/
# folder); logs go to $OUT.
#   tools/gpu/h200_release_check.sh BIN [shards] [cases_per_shard] [mutant_cases]
# Phase A (in parallel): catalogue shards (seed 20261400 + shard, DEV-2 alone), compute-sanitizer
# memcheck/racecheck/initcheck, a 100 s fuzz campaign (its coverage lists cases per KV format and
# layout), the GPU mutants that survived 20 cases (MUTANTS, comma-separated). If the catalogue
# passed: the formats bench (one figure per KV format and layout) and pacts-qualify with the bench
# sets of QUALIFY_SETS (default peers).
# Environment: SHARD_LIMIT (s per catalogue shard, default 140: with 16 cores 8 shards of 90 cases
# fit), MUTANTS (default: the GPU mutants that need hundreds of cases; the race mutants are
# tools/gpu/h200_mutants.sh's racecheck step), BEFORE (a folder with the libpacts_kernels_hip.so of
# the kernels before the change: bf16 and fp16 of the formats set are timed with both, twice,
# alternating), QUALIFY_SETS ("" skips pacts-qualify).
BIN=$(cd "${1:?BIN folder}" && pwd); SHARDS=${2:-8}; CASES=${3:-90}; MCASES=${4:-300}
SHARD_LIMIT=${SHARD_LIMIT:-140}
MUTANTS=${MUTANTS-empty_partition_nan,hip_q_rescale_dropped,hip_out_token_stride_packed}
QUALIFY_SETS=${QUALIFY_SETS-peers}
OUT=${OUT:-/tmp/pacts-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$BIN:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
T0=$SECONDS
for s in $(seq 0 $((SHARDS - 1))); do
  timeout "$SHARD_LIMIT" "$BIN/pacts-conformance" --backend hip --cases "$CASES" --seed $((20261400 + s)) \
    --case-dir "$OUT/failures/shard$s" --gtest_filter='-*DEV_2*' \
    --gtest_output="json:$OUT/shard$s.json" > "$OUT/shard$s.log" 2>&1 &
done
timeout 140 "$BIN/pacts-conformance" --backend hip --cases 12 --case-dir "$OUT/failures/dev2" \
  --gtest_filter='*DEV_2*' --gtest_output="json:$OUT/dev2.json" > "$OUT/dev2.log" 2>&1 &
timeout 130 "$BIN/pacts-fuzz" run --backend hip --seconds 100 --workers-per-device 2 \
  --shrink-steps 40 --out "$OUT/fuzz" > "$OUT/fuzz.log" 2>&1 &
san() { local tool=$1 n=$2; shift 2; timeout 130 compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" \
  "$BIN/pacts-conformance" --backend hip --cases "$n" --gtest_filter='-*DEV_2*' \
  --case-dir "$OUT/failures/$tool" > "$OUT/$tool.log" 2>&1; echo "$tool rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED  \]" "$OUT/$tool.log" | head -5; }
san memcheck 3 --leak-check full > "$OUT/san-memcheck.txt" &
san racecheck 2 > "$OUT/san-racecheck.txt" &
san initcheck 3 > "$OUT/san-initcheck.txt" &
# The mutants run every property but DEV-2 (minutes per case; it kills its own mutant at 3 cases).
PROPS=$(grep -oE 'PACTS-(ACC|POISON|META|EDGE|DEV|REFUSE)-[0-9]+' spec/properties.md | sort -uV | grep -v DEV-2)
if [ -n "$MUTANTS" ] && [ -x "$BIN/pacts-mutate-hip" ]; then
  # shellcheck disable=SC2086
  timeout "$SHARD_LIMIT" "$BIN/pacts-mutate-hip" --backend hip --only "$MUTANTS" --properties $PROPS --jobs 5 \
    --cases "$MCASES" --case-dir "$OUT/mutation-cases" --table-file "$OUT/mutation-table.md" \
    > "$OUT/mutate.log" 2>&1; echo "mutate rc=$?"
fi
wait
echo "== phase A $((SECONDS - T0)) s"
python3 "$(dirname "$0")/catalogue_summary.py" "$OUT"/shard*.json "$OUT/dev2.json" | tee "$OUT/catalogue.txt"
grep -h -E "failed on hip" "$OUT"/shard*.log "$OUT/dev2.log" | cut -c1-250 | sort | uniq -c | sort -rn | head -12
sed -n '/^coverage/,/^[0-9]* failed/p' "$OUT/fuzz.log"
[ -f "$OUT/mutate.log" ] && cut -c1-170 "$OUT/mutate.log"
cat "$OUT"/san-*.txt
tar czf "$OUT/failures.tgz" -C "$OUT" failures 2>/dev/null
if grep -q "failed [1-9]" "$OUT/catalogue.txt"; then echo "catalogue failed: nothing timed"; exit 1; fi
T2=$SECONDS
timeout 110 "$BIN/pacts-bench" --backend hip --set formats --gate-cases 5 --no-unsafe \
  --case-dir "$OUT/bench-gate" --csv "$OUT/formats.csv" --json "$OUT/formats.json" \
  > "$OUT/bench-formats.log" 2>&1; echo "bench formats rc=$? $((SECONDS - T2)) s"
sed -n '/^shape /,$p' "$OUT/bench-formats.log" | cut -c1-150
if [ -n "${BEFORE:-}" ]; then
  for round in 1 2; do
    for which in before after; do
      lib=$BIN; [ "$which" = before ] && lib=$(cd "$BEFORE" && pwd)
      LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH timeout 60 "$BIN/pacts-bench" --backend hip --set formats \
        --limit 4 --gate-cases 2 --no-unsafe --case-dir "$OUT/ab-gate" > "$OUT/ab-$which-$round.log" 2>&1
      echo "A/B round $round $which rc=$?"
      LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH ldd "$BIN/pacts-bench" | grep -o "libpacts_kernels_hip.so => [^ ]*"
      sed -n '/^shape /,$p' "$OUT/ab-$which-$round.log" | cut -c1-150
    done
  done
fi
[ -z "$QUALIFY_SETS" ] && { echo "total $((SECONDS - T0)) s"; exit 0; }
T3=$SECONDS
timeout 300 "$BIN/pacts-qualify" --backend hip --cases 3 --bench-sets "$QUALIFY_SETS" \
  --mustpass conformance/mustpass/v1 --out "$OUT/qualify" > "$OUT/qualify.log" 2>&1
echo "qualify rc=$? $((SECONDS - T3)) s"
tail -45 "$OUT/qualify.log" | cut -c1-170
echo "total $((SECONDS - T0)) s"
