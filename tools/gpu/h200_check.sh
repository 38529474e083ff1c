#!/bin/bash
# Conformance of the "hip" backend on a GPU node (an H200), the timing helper, and the conformance
# binary under compute-sanitizer, in one run. Run from the repository root with the build folder in
# $1 (pacts-conformance, pacts-bench, libpacts_kernels_hip.so); logs go to $OUT.
#   tools/gpu/h200_check.sh .hipbuild [cases] [sanitizer_cases] [tools]
# tools: which compute-sanitizer runs (default "memcheck racecheck initcheck"). The conformance
# step gets 420 s: 300 cases per property take more than 270 s on an H200.
B=${1:-.hipbuild}; CASES=${2:-200}; SAN=${3:-10}; TOOLS=${4:-memcheck racecheck initcheck}
OUT=${OUT:-/tmp/pacts-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
step() { local name=$1 limit=$2; shift 2; echo "== $name: $*"; local t0=$SECONDS;
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?; echo "   rc=$rc $((SECONDS - t0)) s"; }
step conformance 420 "$B/pacts-conformance" --backend hip --cases "$CASES" --case-dir /tmp/failures
grep -E " cases, |FAILED|QualityWarning" "$OUT/conformance.log" | sed 's/^/   /' | cut -c1-220
# Seven shapes of the peers' grid, then forced partition counts (the automatic split's choice
# against its neighbours).
# Each as one pacts-bench shape (behind the gate): "B ctx Hq page [partitions]", D 128, Hkv 8.
step bench 240 bash -c "for a in '32 16384 64 64' '32 16384 64 16' '32 16384 8 64' '128 16384 64 64' '8 16384 64 64' '1 16384 64 64' '32 4096 64 64' '32 16384 64 64 1' '32 16384 64 64 3' '32 16384 64 64 4' '8 16384 64 64 4' '128 16384 64 64 2'; do set -- \$a; $B/pacts-bench --backend hip --gate-cases 1 --no-unsafe --shape \"B\$1 ctx\$2 L1 Hq\$3 Hkv8 D128 p\$4 bf16\" --partitions \${5:-0} | grep -E '^B[0-9]'; done"
cat "$OUT/bench.log"
has() { [[ " $TOOLS " == *" $1 "* ]]; }
has memcheck && step memcheck 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$B/pacts-conformance" --backend hip --cases "$SAN" --case-dir /tmp/failures-mc
has memcheck && grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
has racecheck && step racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/pacts-conformance" --backend hip --cases 10 --case-dir /tmp/failures-rc
has racecheck && grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | head -5
has initcheck && step initcheck 60 compute-sanitizer --tool initcheck --error-exitcode 9 "$B/pacts-conformance" --backend hip --cases 20 --case-dir /tmp/failures-ic
has initcheck && grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/initcheck.log" | head -5
tar czf "$OUT/failures.tgz" /tmp/failures* 2>/dev/null
