#!/bin/bash
# The whole catalogue of the "hip" backend on a GPU node (an H200), in parallel seed shards, DEV-2
# on its own (it moves ~8 GiB per case), and the compute-sanitizer runs. Run from the repository
# root with the CUDA build folder in $1 (built with -DPACTS_ENABLE_CUDA=ON: pacts-conformance,
# libpacts_kernels_hip.so); logs go to $OUT.
#   tools/gpu/h200_session.sh BUILD [shards] [cases_per_shard] [sanitizer_cases]
# Time limits (seconds) from the environment: CAT_LIMIT (catalogue shards, default 250),
# SAN_LIMIT (each sanitizer run, default 90).
# Each shard runs every property (DEV-2 excepted) with its own seed (20261129 + shard), so the
# cases of the shards differ; the summary adds them up per property.
B=${1:-.devbuild}; SHARDS=${2:-12}; CASES=${3:-150}; SAN=${4:-5}
CAT_LIMIT=${CAT_LIMIT:-250}; SAN_LIMIT=${SAN_LIMIT:-90}
OUT=${OUT:-/tmp/pacts-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/kernels/hip:$B:$LD_LIBRARY_PATH
CONF=$(find "$B" -name pacts-conformance -type f | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
t0=$SECONDS
for s in $(seq 0 $((SHARDS - 1))); do
  timeout "$CAT_LIMIT" "$CONF" --backend hip --cases "$CASES" --seed $((20261129 + s)) \
    --case-dir "$OUT/failures/shard$s" --gtest_filter='-*DEV_2*' \
    --gtest_output="json:$OUT/shard$s.json" > "$OUT/shard$s.log" 2>&1 &
done
timeout "$CAT_LIMIT" "$CONF" --backend hip --cases 12 --case-dir "$OUT/failures/dev2" \
  --gtest_filter='*DEV_2*' --gtest_output="json:$OUT/dev2.json" > "$OUT/dev2.log" 2>&1 &
wait
echo "== catalogue: $SHARDS shards x $CASES cases, $((SECONDS - t0)) s"
# Per property: generated cases, passed, NotSupported, worst error/bound over the shards.
python3 "$(dirname "$0")/catalogue_summary.py" "$OUT"/shard*.json "$OUT/dev2.json" | tee "$OUT/catalogue.txt"
grep -h -E "FAILED  \]|failed on hip" "$OUT"/shard*.log "$OUT/dev2.log" | sort | uniq -c | head -20
step() { local name=$1 limit=$2; shift 2; echo "== $name: $*"; local t=$SECONDS;
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "   rc=$? $((SECONDS - t)) s"; }
step memcheck "$SAN_LIMIT" compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
  "$CONF" --backend hip --cases "$SAN" --gtest_filter='-*DEV_2*' --case-dir "$OUT/failures/mc"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
step racecheck "$SAN_LIMIT" compute-sanitizer --tool racecheck --error-exitcode 9 \
  "$CONF" --backend hip --cases 3 --gtest_filter='-*DEV_2*' --case-dir "$OUT/failures/rc"
grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | head -5
step initcheck "$SAN_LIMIT" compute-sanitizer --tool initcheck --error-exitcode 9 \
  "$CONF" --backend hip --cases "$SAN" --gtest_filter='-*DEV_2*' --case-dir "$OUT/failures/ic"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/initcheck.log" | head -5
# Seven shapes of the peers' grid, one pacts-bench run each (behind the gate): bf16, D 128, Hkv 8.
BENCH=$(find "$B" -name pacts-bench -type f | head -1)
if [ -n "$BENCH" ]; then
  echo "== pacts-bench, one shape each"
  for s in 'B32 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16' 'B32 ctx16384 L1 Hq64 Hkv8 D128 p16 bf16' \
           'B32 ctx16384 L1 Hq8 Hkv8 D128 p64 bf16' 'B128 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16' \
           'B8 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16' 'B1 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16' \
           'B32 ctx4096 L1 Hq64 Hkv8 D128 p64 bf16'; do
    timeout 60 "$BENCH" --backend hip --gate-cases 1 --no-unsafe --shape "$s" | grep -E '^B[0-9]'
  done 2>&1 | tee "$OUT/bench.log"
fi
tar czf "$OUT/failures.tgz" -C "$OUT" failures 2>/dev/null
