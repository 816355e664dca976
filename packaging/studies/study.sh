#!/bin/bash
# The defaults study (the manual's table, resources/manual/ranking-and-defaults.md): every model at ρ 0.1–0.5, the three cross-layer rankings of
# the numerical score (default relative λ for z), FLAP, Wanda-sp, magnitude. Run from the
# worktree root; samples for the llama2.c models as in packaging/studies/defaults-study.md (in $W).
# Tables: /usr/bin/python3 packaging/studies/study_table.py $W/study-MODEL.csv (mean ± sd over seeds).
N=${NPW:-build/app/npw}
W=${W:-/tmp/ds}
D=resources/demo/data
M=${M:-numerical-lstar-rel,numerical-lstar,numerical-z,flap,wanda-sp,magnitude}  # M=… to run a subset
R=0.1,0.2,0.3,0.4,0.5
case $1 in
stories) $N sweep tests/data/stories260K/stories260K.bin --methods $M --ratios $R --calib $W/stories-calib.txt \
           --calib-per-line --nsamples 32 --seqlen 128 --seeds 3 --eval ids:$W/stories-eval.txt --eval-seqlen 401 \
           --csv $W/study-stories.csv ;;
baby)    $N sweep tests/data/babyllama/model5000.bin --methods $M --ratios $R --calib $W/baby-calib.txt \
           --calib-per-line --nsamples 32 --seqlen 128 --seeds 1 --eval ids:$W/baby-eval.txt --eval-seqlen 256 \
           --csv $W/study-baby.csv ;;
lm|lm-gqa) $N sweep demo:$1 --methods $M --ratios $R --calib $D/kjv-ot.txt --nsamples 128 --seqlen 128 --seeds 3 \
           --eval text:$D/kjv-nt.txt --eval-seqlen 128 --max-windows 50 --csv $W/study-$1.csv ;;
c2i)     # held-out token perplexity of all 10,000 test images' codes, every method and ρ (cheap) ...
         $N sweep demo:c2i --methods $M --ratios $R --per-class 16 --cfg 2 --token-ppl 10000 --token-ppl-only \
           --csv $W/study-c2i-tokppl.csv
         # ... and FID & co. on 500 generated images per model beside it (slow)
         $N sweep demo:c2i --methods $M --ratios 0.2,0.3,0.5 --per-class 16 --samples 500 --cfg 2 \
           --token-ppl 10000 --csv $W/study-c2i.csv ;;
esac
