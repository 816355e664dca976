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
  bible-kjv jargon-text dataset-fashion-mnist python3-torch python3-numpy python3-sentencepiece)
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
# ccache, where installed, makes rebuilds after a checkout quick; it is not required.
LAUNCHER=""
if command -v ccache >/dev/null 2>&1; then LAUNCHER="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"; fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo $LAUNCHER ${NPW_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"
# The real llama.cpp for tests/tst_gguf_llamacpp (npm's node-llama-cpp, prebuilt CPU binary, 85 MB,
# ~20 s): only where Node and npm are installed; the suite is skipped otherwise. `npm install`
# with the committed lock (npm 11's `npm ci` rejects a lock whose optional per-platform packages
# were omitted); --omit=optional leaves out the CUDA/Vulkan/macOS/Windows builds (640 MB).
# NPW_LLAMACPP=0 skips it.
if [ "${NPW_LLAMACPP:-1}" != "0" ] && command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  if [ ! -f tests/fixtures/llamacpp/node_modules/node-llama-cpp/package.json ]; then
    echo "npw setup: installing node-llama-cpp into tests/fixtures/llamacpp" >&2
    (cd tests/fixtures/llamacpp && npm install --omit=optional --no-audit --no-fund --loglevel=error) ||
      echo "npw setup: WARNING: node-llama-cpp could not be installed; tst_gguf_llamacpp will be skipped" >&2
  fi
fi
