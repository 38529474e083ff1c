#!/bin/bash
# The GPU mutants on an H200 (mutation/README.md, "The GPU part"): builds
# pacts-mutate-hip when it is missing, runs every GPU-relevant mutant against the hip backend and
# prints the table mutant -> killing property -> cases, then runs the barrier mutants once under
# compute-sanitizer racecheck (with the production kernels, mutant `none`, as the control).
# Run from the repository root; logs, the table and the killing cases go to $OUT.
#   tools/gpu/h200_mutants.sh [build-dir] [cases] [jobs]
# The binary is looked for as build-dir/pacts-mutate-hip, then build-dir/mutation/pacts-mutate-hip.
# A GPU node need not have a compiler: build the binary on a build machine and copy it to the node
# (static CUDA runtime, about 30 MB):
#   cmake --build build-gmut --target pacts-mutate-hip   (a -DPACTS_ENABLE_CUDA=ON build)
#   mkdir -p build-hipmut && cp build-gmut/mutation/pacts-mutate-hip build-hipmut/
#   tools/gpu/h200_mutants.sh build-hipmut                (on the node)
# STEPS (default "mutate racecheck") picks the parts. The run of pacts-mutate-hip gets MUTATE_LIMIT
# (default 420) s; the four racecheck runs (75 s each, one after the other) run next to it, so
# the whole script takes about 420 s.
set -u
B=${1:-build-gmut}; CASES=${2:-20}; JOBS=${3:-4}; STEPS=${STEPS:-mutate racecheck}
MUTATE_LIMIT=${MUTATE_LIMIT:-420}
has() { [[ " $STEPS " == *" $1 "* ]]; }
OUT=${OUT:-/tmp/pacts-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
step() { local name=$1 limit=$2; shift 2; echo "== $name: $*"; local t0=$SECONDS;
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?; echo "   rc=$rc $((SECONDS - t0)) s"
  return $rc; }

M="$B/pacts-mutate-hip"
[ -x "$M" ] || M="$B/mutation/pacts-mutate-hip"
if [ ! -x "$M" ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  step configure 120 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACTS_BUILD_TESTS=OFF \
    -DPACTS_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" || { tail -20 "$OUT/configure.log"; exit 1; }
  step build 480 cmake --build "$B" -j "$(nproc)" --target pacts-mutate-hip ||
    { tail -40 "$OUT/build.log"; exit 1; }
fi

# The GPU-relevant mutants: the mutants of kernels/common/ that the NVIDIA path reaches, and every
# mutant of kernels/hip/ (named hip_*, read from --list so that a new one is never left out).
# Left out: the kernels/host/ mutants (not in the HIP kernels). The format mutants of
# kernels/common (e8m0, e4m3fn, MXFP4 nibbles) are in: the HIP kernels decode every format.
common="fp16_subnormals_flushed,q_scale_ignored,q_scale_after_dot,causal_sees_next_key"
common+=",window_one_short,window_one_long,partition_overlap,context_len_bound_exclusive"
common+=",bf16_truncated,rescale_skipped,merge_wrong_max,empty_partition_nan,lse_base2"
common+=",e8m0_zero_as_zero,e8m0_ff_not_nan,e4m3fn_read_as_fnuz,nibbles_swapped,max_sentinel_finite"
hip=$("$M" --list | awk -F' \\| ' '$2 ~ /^hip_/ {printf "%s%s", sep, $2; sep=","}')
echo "common mutants: $common"
echo "hip mutants:    $hip"

# Racecheck: the race mutants on a few cases of ACC-1 (the first property; the cases draw D, and
# the two barriers matter only for D 64 and 128, where a block has 4 warps); exit status 9 when
# racecheck reports a hazard. The control (`none`) must report none. In the background, next to
# the mutants; its summary is printed at the end.
racecheck() {
  for m in none hip_q_barrier_dropped hip_final_barrier_dropped hip_cp_async_wait_skipped; do
    step "racecheck-$m" 75 compute-sanitizer --tool racecheck --error-exitcode 9 \
      "$M" --backend hip --mutant "$m" --properties PACTS-ACC-1 --cases 6 --timeout 70 \
      --case-dir "$OUT/racecheck-cases-$m"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|pacts-mutate-result" "$OUT/racecheck-$m.log" | head -3
  done > "$OUT/racecheck-summary.txt" 2>&1
}
has racecheck && racecheck &
has mutate && step mutate "$MUTATE_LIMIT" "$M" --backend hip --only "$common,$hip" --jobs "$JOBS" --cases "$CASES" \
  --case-dir "$OUT/mutation-cases" --table-file "$OUT/mutation-table-hip.md"
has mutate && grep -E "^  [a-z0-9_ ()]+ +(killed|warned|survived|crashed|timeout|error) " "$OUT/mutate.log"
has mutate && sed -n '/^| mutant |/,$p' "$OUT/mutate.log"

wait
has racecheck && cat "$OUT/racecheck-summary.txt"
tar czf "$OUT/mutation-cases.tgz" -C "$OUT" mutation-cases 2>/dev/null
