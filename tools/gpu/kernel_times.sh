#!/bin/bash
# The GPU time of each kernel of one pacts-bench shape, launch by launch: ncu's
# gpu__time_duration of the tile and merge kernels over the last N launches (pacts-bench's timed
# graph replays come last, then the one call whose output is checked), with their grid sizes; the mean, min and max per kernel. ncu's
# defaults hold (clocks locked at base, caches flushed before each kernel): the times are longer
# than pacts-bench's and serve to split a call between its kernels, not to quote speed. A kernel
# listed with fewer than N launches ran only in the conformance gate before the timing.
# Run from the repository root with the folder holding pacts-bench and libpacts_kernels_hip.so:
#   tools/gpu/kernel_times.sh BIN "B1 ctx1024 L1 Hq8 Hkv8 D128 p16 bf16" [N]
B=${1:?BIN folder}; SHAPE=${2:?shape label}; N=${3:-20}
OUT=${OUT:-/tmp/pacts-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH
csv="$OUT/kernel_times.csv"
timeout 300 ncu --metrics gpu__time_duration.sum,launch__grid_size --csv \
  -k regex:"split_kv|merge" --launch-count 2000 \
  "$B/pacts-bench" --backend hip --gate-cases 1 --no-unsafe --repeats "$N" --shape "$SHAPE" \
  > "$csv" 2>&1 || { tail -20 "$csv"; exit 1; }
# Fields: ID, PID, process, host, kernel name, ..., metric name (13th), unit, value (15th). The
# last N launches of each kernel: the timed replays (an unsplit plan launches no merge kernel).
grep '"gpu__time_duration.sum"' "$csv" |
  awk -F'","' -v N="$N" '{ name = $5; sub(/\(.*$/, "", name); v = $15; gsub(/[",]/, "", v); v += 0
                           c = ++count[name]; val[name, c] = v }
    END { for (k in count) {
            s = 0; lo = -1; hi = 0; first = count[k] > N ? count[k] - N + 1 : 1
            for (i = first; i <= count[k]; ++i) {
              v = val[k, i]; s += v; if (lo < 0 || v < lo) lo = v; if (v > hi) hi = v }
            n = count[k] - first + 1
            printf "%-48s launches %3d  mean %9.1f us  min %9.1f  max %9.1f\n", k, n, s / n / 1000,
                   lo / 1000, hi / 1000 } }'
