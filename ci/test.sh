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
# The Python package (python/pacts_child): its own tests, and the NumPy example kernel judged by
# the whole catalogue through the process backend, with Debian's python3-numpy.
python=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  echo "pacts: no python3 with NumPy (ci/deps.sh installs python3-numpy)"; status=1
else
  echo "== python/pacts_child ($python)"
  "$python" -m unittest discover -s python/tests -v || status=$?
fi
# The mutation table: which property killed each host mutant, in the CI log.
if [ -f build/mutation-table.md ]; then
  echo "== host mutants (build/mutation-table.md)"
  cat build/mutation-table.md
fi
exit "$status"
