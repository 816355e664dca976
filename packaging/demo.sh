#!/usr/bin/env bash
# Quick start, command 1: install, build, and run the main job on the bundled demo models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/setup.sh
./build/app/npw demo --out npw-demo-results "$@"
