#!/usr/bin/env bash
# Installs what pacts needs to build and test, from Debian 12 (bookworm) packages only.
# Installs nothing when everything is present; needs root (or sudo) when something is missing.
set -euo pipefail

packages=(
  cmake g++ make
  libgtest-dev libgmock-dev librapidcheck-dev
  libboost-dev nlohmann-json3-dev libcli11-dev
  python3 python3-numpy
  pkgconf dpkg-dev file shellcheck
  ccache
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "pacts: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
