#!/usr/bin/env bash
# Quick start, command 2: install, build, and run the whole test suite (CTest over Qt Test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/setup.sh
cd "${NPW_BUILD_DIR:-build}"
# TEST ONLY: a build linked against setup.sh's stand-in cuDNN (NPW_CUDNN_STUB=1) finds it through
# its RPATH; the Python references of some suites (python3-torch-cuda) need it on the library path.
if [ -f cudnn-stub/libcudnn.so.9 ]; then export LD_LIBRARY_PATH="$PWD/cudnn-stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j"$(nproc)" "$@"
