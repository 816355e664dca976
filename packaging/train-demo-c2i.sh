#!/usr/bin/env bash
# How the committed demo image model was made (resources/demo/c2i: the class-conditional GPT,
# with its VQ tokenizer in resources/demo/c2i/vq). Fashion-MNIST from Debian's
# dataset-fashion-mnist. Deterministic from the seed at a fixed thread count (NPW_NUM_THREADS);
# resumable: both trainers checkpoint into work-train/ and the same command continues where a
# stopped run left off (--max-minutes M stops after M minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
NPW=${NPW:-build/app/npw}
mkdir -p work-train
[ -f work-train/c2i-vq/model.safetensors ] ||
  "$NPW" train-vq --seed 1 --work work-train/c2i-vq.train --out work-train/c2i-vq ${MAX_MINUTES:+--max-minutes $MAX_MINUTES}
[ -f work-train/c2i-vq/model.safetensors ] || { echo "VQ training stopped early; run again to resume" >&2; exit 0; }
"$NPW" train-c2i --seed 1 --vq work-train/c2i-vq --work work-train/c2i.train --out resources/demo/c2i \
  ${MAX_MINUTES:+--max-minutes $MAX_MINUTES}
