#!/usr/bin/env bash
# The tests: install, configure, build, compile-check the GPU kernels (ci/gpu_compile.sh), and
# run every ctest test. JUnit XML is written to build/ctest-junit.xml. Extra arguments go to
# ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/build.sh
bash ci/gpu_compile.sh
status=0
ctest --preset default -j "$(nproc)" --output-junit "$PWD/build/ctest-junit.xml" "$@" || status=$?
echo "JUnit report: build/ctest-junit.xml"
# The mutation table: which property killed each host mutant, in the CI log.
if [ -f build/mutation-table.md ]; then
  echo "== host mutants (build/mutation-table.md)"
  cat build/mutation-table.md
fi
exit "$status"
