#!/bin/bash
# Issue 19: the paper's Table 1 in miniature (resources/manual/benchmarks.md): the numerical score (default),
# FLAP, LLM-Pruner, SliceGPT and ShortGPT's block influence at ρ 0.1–0.5 on the demo models
# (3 seeds) and the llama2.c models (1 seed), calibration and evaluation as packaging/studies/study.sh.
# The llama2.c samples ($W/*-calib.txt, *-eval.txt) are made as packaging/studies/defaults-study.md says.
N=${NPW:-build/app/npw}
W=${W:-/tmp/ds}
O=${O:-/tmp/baselines}
D=resources/demo/data
M=numerical,flap,llm-pruner,slicegpt,block-influence
R=0.1,0.2,0.3,0.4,0.5
mkdir -p $O
case $1 in
stories) $N sweep tests/data/stories260K/stories260K.bin --methods $M --ratios $R --calib $W/stories-calib.txt \
           --calib-per-line --nsamples 32 --seqlen 128 --seeds 1 --eval ids:$W/stories-eval.txt --eval-seqlen 401 \
           --csv $O/table-stories.csv ;;
baby)    $N sweep /work/shared/fixtures/babyllama/model5000.bin --methods $M --ratios $R --calib $W/baby-calib.txt \
           --calib-per-line --nsamples 32 --seqlen 128 --seeds 1 --eval ids:$W/baby-eval.txt --eval-seqlen 256 \
           --csv $O/table-baby.csv ;;
lm|lm-gqa) $N sweep demo:$1 --methods $M --ratios $R --calib $D/kjv-ot.txt --nsamples 128 --seqlen 128 --seeds 3 \
           --eval text:$D/kjv-nt.txt --eval-seqlen 128 --max-windows 50 --csv $O/table-$1.csv ;;
esac
