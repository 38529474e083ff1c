#!/usr/bin/env bash
# Compile checks of the HIP kernels for the GPU targets this machine has no device for:
# NVIDIA sm_90 with nvcc when nvcc is present, AMD gfx942 and gfx950 device code with
# Debian's clang-22 (installed when missing). Compile-only: nothing here runs a kernel. Prints
# what ptxas and clang report about registers and spills.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=ci/ccache_env.sh
source ci/ccache_env.sh

nvcc=""
for candidate in "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then nvcc="$candidate"; break; fi
done
if ! command -v clang++-22 >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "pacts: installing clang-22 and lld-22 for the AMD compile check"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-22 lld-22
fi

# The C++ flags of the default preset (RelWithDebInfo, warnings as errors), so that the sources both
# folders compile are compiled once (ci/ccache_env.sh).
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACTS_WERROR=ON -DPACTS_BUILD_TESTS=ON -DPACTS_CHECK_AMD=ON)
targets=(pacts_hip_amd_check)
if [ -n "$nvcc" ]; then
  # The mutant and bench-variant libraries as PTX only (kernels/hip/CMakeLists.txt,
  # PACTS_CHECK_PTX_ONLY): their code is compiled and checked, the machine code is the production
  # library's alone (whose ptxas report is printed below).
  args+=(-DPACTS_ENABLE_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DPACTS_CHECK_PTX_ONLY=ON)
  # The kernels, their GPU test, and everything that links them in a CUDA build: the hip
  # backend (pacts-conformance, pacts-qualify), pacts-fuzz, pacts-bench with its unsafe variant,
  # the mutant build and the program that runs it.
  targets+=(pacts_kernels_hip pacts_common_gpu_test pacts_hip_streams_test pacts-conformance pacts-qualify pacts-fuzz
            pacts-bench pacts_kernels_hip_mutants pacts-mutate-hip)
else
  echo "pacts: no nvcc on this machine: the sm_90 build is skipped (AMD compile check only)"
fi
# Its own build folder: the GPU build that docs/kernel-design.md describes (build-gpu, Release) is
# never reconfigured by the test command.
cmake -S . -B build-gpu-check "${args[@]}" > build-gpu-check.log 2>&1 || { cat build-gpu-check.log; exit 1; }
cmake --build build-gpu-check -j "$(nproc)" --target "${targets[@]}" >> build-gpu-check.log 2>&1 || {
  tail -50 build-gpu-check.log; exit 1; }
echo "GPU compile checks passed (compile-only: no kernel ran here)"
if [ "${CMAKE_CXX_COMPILER_LAUNCHER:-}" = ccache ]; then
  echo "C++ objects taken from the cache (both build folders, ci/ccache_env.sh):"
  ccache --show-stats | grep -E "^ *(Hits|Misses):" || true
fi
if [ -n "$nvcc" ]; then
  echo "sm_90 (ptxas), distinct register/spill lines:"
  grep -E "Used [0-9]+ registers|spill" build-gpu-check.log | sed 's/^.*ptxas info *: *//' | sort | uniq -c | head -20 ||
    echo "  (none: nothing was recompiled; build-gpu-check was up to date)"
fi
echo "gfx942/gfx950 (clang-22), distinct resource lines:"
grep -E "(VGPRs|SGPRs|ScratchSize|Occupancy|LDS Size).*:" build-gpu-check.log | sed 's/^.*remark: *//' | sort | uniq -c | head -20 ||
  echo "  (none: nothing was recompiled; build-gpu-check was up to date)"
