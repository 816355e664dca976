#!/usr/bin/env bash
# Installs npw's dependencies (Debian bookworm packages only) and builds it into build/.
# Run as root (or with sudo available). Safe to run again: apt and CMake skip done work.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PACKAGES=(cmake g++ make pkg-config
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6 libtorch-dev libstb-dev
  libopenblas0-pthread nlohmann-json3-dev libicu-dev zlib1g-dev xvfb xauth
  bible-kjv jargon-text dataset-fashion-mnist python3-torch python3-numpy)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "npw setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}"
fi
BUILD_DIR="${NPW_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${NPW_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"
