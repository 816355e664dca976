#!/usr/bin/env bash
# How the committed demo language models were made (resources/demo/lm, resources/demo/lm-gqa).
# Deterministic from the seed. Resumable: training checkpoints into work-train/ and the same
# command continues where a stopped run left off. The committed models were trained side
# by side, one core each: OPENBLAS_NUM_THREADS=1 NPW_NUM_THREADS=1 PRESETS=lm (and lm-gqa).
set -euo pipefail
cd "$(dirname "$0")/.."
NPW=${NPW:-build/app/npw}
mkdir -p work-train
[ -f work-train/tokenizer.json ] ||
  "$NPW" train-tokenizer --corpus resources/demo/data/kjv-ot.txt --vocab 2048 --out work-train/tokenizer.json
for preset in ${PRESETS:-lm lm-gqa}; do
  "$NPW" train-lm --preset "$preset" --seed 1 --corpus resources/demo/data/kjv-ot.txt \
    --tokenizer work-train/tokenizer.json --work "work-train/$preset" --out "resources/demo/$preset"
done
