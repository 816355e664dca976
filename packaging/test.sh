#!/usr/bin/env bash
# Quick start, command 2: install, build, and run the whole test suite (CTest over Qt Test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/setup.sh
cd build
QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j"$(nproc)" "$@"
