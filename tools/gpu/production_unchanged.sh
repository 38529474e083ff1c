#!/bin/bash
# Proves that mutant points left the production HIP kernels unchanged (mutation/README.md): builds
# libpacts_kernels_hip.so (nvcc, sm_90) from a git revision and from the working tree, then
# compares the device code: the whole .nv_fatbin section (every kernel's sm_90 code and the PTX)
# and, per kernel, the bytes of its .text section in the cubin, plus the host .text. Byte
# equality, so no cuobjdump is needed (none may be installed); compile-only, no GPU.
#   tools/gpu/production_unchanged.sh [revision (default HEAD)] [work dir (default /tmp/pacts-unchanged)]
set -euo pipefail
REV=${1:-HEAD}; W=${2:-/tmp/pacts-unchanged}
cd "$(dirname "$0")/../.."
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
rm -rf "$W/src-before"; mkdir -p "$W/src-before"
git archive "$REV" | tar -x -C "$W/src-before"
build() {  # source dir, build dir
  # Tests ON: older revisions' mutation/CMakeLists.txt needed them to find Threads.
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACTS_BUILD_TESTS=ON \
    -DPACTS_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" > "$2.log" 2>&1 &&
    cmake --build "$2" -j 2 --target pacts_kernels_hip >> "$2.log" 2>&1 ||
    { tail -20 "$2.log"; exit 1; }
}
build "$W/src-before" "$W/before"
build "$PWD" "$W/after"
for w in before after; do
  lib="$W/$w/kernels/hip/libpacts_kernels_hip.so"
  objcopy -O binary --only-section=.nv_fatbin "$lib" "$W/$w.fatbin"
  objcopy -O binary --only-section=.text "$lib" "$W/$w.host-text"
  tools/gpu/kernel_hashes.sh "$lib" > "$W/$w.kernels"
done
echo "kernels: $(wc -l < "$W/after.kernels") in the working tree, $(wc -l < "$W/before.kernels") at $REV"
status=0
cmp -s "$W/before.fatbin" "$W/after.fatbin" && echo ".nv_fatbin: identical ($(stat -c %s "$W/after.fatbin") bytes)" ||
  { echo ".nv_fatbin: DIFFERENT"; status=1; }
diff "$W/before.kernels" "$W/after.kernels" > /dev/null && echo "per-kernel .text: identical" ||
  { echo "per-kernel .text: DIFFERENT"; diff "$W/before.kernels" "$W/after.kernels" | c++filt; status=1; }
cmp -s "$W/before.host-text" "$W/after.host-text" && echo "host .text: identical" ||
  { echo "host .text: DIFFERENT (host code; check whether the change is a mutant point)"; status=1; }
exit $status
