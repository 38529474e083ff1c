#!/bin/bash
# One device call on an H200 (issue 5): conformance of the "hip" backend, the timing helper, and
# the conformance binary under compute-sanitizer. Run from the repository root with the build
# folder in $1 (pacts-conformance, pacts-bench-hip, libpacts_kernels_hip.so); logs go to $OUT.
#   kernels/hip/scripts/h200_check.sh .hipbuild [cases] [sanitizer_cases]
B=${1:-.hipbuild}; CASES=${2:-200}; SAN=${3:-10}
OUT=${OUT:-/tmp/pacts-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
step() { local name=$1 limit=$2; shift 2; echo "== $name: $*"; local t0=$SECONDS;
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?; echo "   rc=$rc $((SECONDS - t0)) s"; }
step conformance 300 "$B/pacts-conformance" --backend hip --cases "$CASES" --case-dir /tmp/failures
grep -E " cases, |FAILED|QualityWarning" "$OUT/conformance.log" | sed 's/^/   /' | cut -c1-220
step bench 120 bash -c "for a in '32 16384 8 64' '32 16384 8 64' '32 16384 8 16' '32 16384 1 64' '128 16384 8 64' '8 16384 8 64' '1 16384 8 64' '32 4096 8 64' '32 16384 8 64 30 6' '32 16384 8 64 30 12'; do $B/pacts-bench-hip \$a 30; done"
cat "$OUT/bench.log"
step memcheck 200 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$B/pacts-conformance" --backend hip --cases "$SAN" --case-dir /tmp/failures-mc
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5
step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/pacts-conformance" --backend hip --cases 10 --case-dir /tmp/failures-rc
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | head -5
step initcheck 90 compute-sanitizer --tool initcheck --error-exitcode 9 "$B/pacts-conformance" --backend hip --cases 20 --case-dir /tmp/failures-ic
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/initcheck.log" | head -5
tar czf "$OUT/failures.tgz" /tmp/failures* 2>/dev/null
