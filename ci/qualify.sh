#!/usr/bin/env bash
# The main job: install (ci/deps.sh), configure, build, then run pacts-qualify on this machine's
# backends. The report (report.md, report.json, report.junit.xml) goes to a dated folder
# qualify-YYYYMMDD-HHMMSS/ in the repository root, and report.json is also copied to
# build/qualify.json. Extra arguments go to pacts-qualify (e.g. --backend-lib PATH, --out DIR).
# Exit status: pacts-qualify's (0 qualified, 1 a Mandatory failure, 2 a usage or load error).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/build.sh
# report.json is also copied to build/qualify.json, unless the caller names a --json of its own.
json=(--json "$PWD/build/qualify.json")
for a in "$@"; do
  case "$a" in --json | --json=*) json=() ;; esac
done
./build/conformance/pacts-qualify "${json[@]}" "$@"
