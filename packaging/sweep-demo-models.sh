#!/usr/bin/env bash
# The pruning comparison in the manual (resources/manual/sweep-and-baselines.md, "Perplexity against sparsity"): every method at
# ρ = 0.1 … 0.5, three calibration seeds, on demo:lm, demo:lm-gqa (held-out New Testament and
# the Jargon File) and the llama2.c fixture stories260K (ids sampled from the model itself).
# Usage: packaging/sweep-demo-models.sh [OUT_DIR] [MAX_WINDOWS]   (needs a built build/app/npw)
# Each model's sweep writes OUT_DIR/<model>.csv and .json; sweep-table.py turns the CSVs into the
# manual's tables. About 20-40 minutes per model on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-sweep-results}
max_windows=${2:-200}
npw=${NPW:-build/app/npw}
data=resources/demo/data
mkdir -p "$out"
methods=numerical,numerical-nocomp,flap,wanda-sp,magnitude,random
ratios=0.1,0.2,0.3,0.4,0.5

for model in lm lm-gqa; do
    [ -s "$out/$model.json" ] && continue
    "$npw" sweep "demo:$model" --methods $methods --ratios $ratios --seeds 3 \
        --calib $data/kjv-ot.txt --nsamples 128 --seqlen 128 \
        --eval text:$data/kjv-nt.txt,text:$data/jargon.txt --eval-seqlen 128 --max-windows "$max_windows" \
        --csv "$out/$model.csv" --json > "$out/$model.json.tmp"
    mv "$out/$model.json.tmp" "$out/$model.json"
done

# stories260K has no tokenizer here: calibrate and evaluate on sequences sampled from it from
# BOS (temperature 1; distinct seeds for calibration and evaluation). This small model needs BOS
# at position 0 (its own samples score perplexity ~9 from BOS, thousands in windows cut
# mid-sample), so every calibration window is the start of a sample (--calib-per-line) and
# every evaluation window one whole sample (--eval-seqlen 401 = BOS + 400 tokens).
stories=../shared/fixtures/stories260K.bin
if [ -f "$stories" ] && [ ! -s "$out/stories260K.json" ]; then
    sample() {  # TOKENS FIRST LAST → one line of ids (BOS + TOKENS) per seed
        for s in $(seq "$2" "$3"); do
            "$npw" generate "$stories" --prompt-ids 1 --temperature 1 --tokens "$1" --no-stop --seed "$s" --json |
                /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(*j["prompt_ids"], *j["ids"])'
        done
    }
    [ -s "$out/stories-calib-ids.txt" ] || sample 127 1 128 > "$out/stories-calib-ids.txt"
    [ -s "$out/stories-eval-ids.txt" ] || sample 400 1001 1024 > "$out/stories-eval-ids.txt"
    "$npw" sweep "$stories" --methods $methods --ratios $ratios --seeds 3 \
        --calib "$out/stories-calib-ids.txt" --calib-per-line --nsamples 64 --seqlen 128 \
        --eval "ids:$out/stories-eval-ids.txt" --eval-seqlen 401 \
        --csv "$out/stories260K.csv" --json > "$out/stories260K.json.tmp"
    mv "$out/stories260K.json.tmp" "$out/stories260K.json"
    # The λ study's other end (the manual's "Choosing λ"), for the paper's ranking z (λ does not change the default
    # ranking's masks): this model's c = 1ᵀA⁻¹1 is ~40× smaller.
    "$npw" sweep "$stories" --methods numerical-z --lambda 100 --ratios $ratios --seeds 3 \
        --calib "$out/stories-calib-ids.txt" --calib-per-line --nsamples 64 --seqlen 128 \
        --eval "ids:$out/stories-eval-ids.txt" --eval-seqlen 401 --csv "$out/stories260K-lambda100.csv" > /dev/null
fi
/usr/bin/python3 packaging/sweep-table.py "$out"/lm.csv "$out"/lm-gqa.csv "$out"/stories260K.csv "$out"/stories260K-lambda100.csv > "$out/tables.md"
cat "$out/tables.md"
