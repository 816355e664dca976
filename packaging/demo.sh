#!/usr/bin/env bash
# Quick start, command 1: install, build, and open the bundled demo: in npw-studio when a
# display is there, else the main job on the command line (`npw demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/setup.sh
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/app/studio/npw-studio ]; then
  exec ./build/app/studio/npw-studio demo:lm "$@"
fi
./build/app/npw demo --out npw-demo-results "$@"
