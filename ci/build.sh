#!/usr/bin/env bash
# Configures and builds pacts with the default preset (build/), after installing what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/deps.sh
# shellcheck source=ci/ccache_env.sh
source ci/ccache_env.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
