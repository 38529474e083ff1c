# shellcheck shell=bash
# Sourced by ci/build.sh and ci/gpu_compile.sh. The test command configures two build folders
# (build/ and the GPU compile check's build-gpu-check/) whose C++ sources are mostly the same
# files with the same flags: with ccache (ci/deps.sh installs it) the second folder takes those
# objects from the first instead of compiling them again. The cache lives in build/ccache, so a
# fresh clone starts empty and nothing outside the clone is read; paths are hashed relative to the
# clone (both folders sit at the same depth). CMake reads CMAKE_CXX_COMPILER_LAUNCHER from the
# environment only when it configures a folder for the first time; a folder configured earlier
# keeps what it had. PACTS_NO_CCACHE=1 turns it off.
if [ -z "${PACTS_NO_CCACHE:-}" ] && command -v ccache >/dev/null 2>&1; then
  pacts_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CCACHE_DIR=${CCACHE_DIR:-$pacts_root/build/ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$pacts_root}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
fi
