#!/usr/bin/env bash
# The main job: install, configure, build, then run pacts-qualify on this machine's backends.
# The summary is printed and written to build/qualify.json. Extra arguments go to pacts-qualify.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/build.sh
./build/conformance/pacts-qualify --json "$PWD/build/qualify.json" "$@"
