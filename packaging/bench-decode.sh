#!/usr/bin/env bash
# Decode speed of npw against llama2.c's plain C loop (run.c) on the same random weights, one
# thread each, alternating runs in one session so that both see the same machine load (issue 17).
#
#   packaging/bench-decode.sh [ROUNDS] [DIM HIDDEN LAYERS HEADS KV VOCAB SEQ]
#   default: 3 rounds, GPT-2-small shape (768 2048 12 12 12 32000 1024: 134M parameters with the
#   unshared classifier, 110M without the embedding table)
#
# Needs gcc and ../shared/fixtures/llama2c-run/run.c (or NPW_RUNC=path/to/run.c), python3-numpy,
# and a built npw (NPW_BIN, default build/app/npw). Prints each run and the median ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
shape=("$@")
[ ${#shape[@]} -eq 7 ] || shape=(768 2048 12 12 12 32000 1024)
npw=${NPW_BIN:-build/app/npw}
runc=${NPW_RUNC:-../shared/fixtures/llama2c-run/run.c}
work=${NPW_BENCH_DIR:-build/bench-decode}
mkdir -p "$work"
name="$work/llama2c-$(IFS=-; echo "${shape[*]}")"
[ -f "$name.bin" ] || /usr/bin/python3 tests/fixtures/make_random_llama2c.py "${shape[@]}" "$name"
gcc -Ofast -march=native -o "$work/run" "$runc" -lm
tokens=128
npw_rates=() runc_rates=()
for ((i = 1; i <= rounds; i++)); do
  n=$(NPW_NUM_THREADS=1 OMP_NUM_THREADS=1 "$npw" bench "$name.bin" --device cpu --prompt-tokens 1 \
        --decode-tokens $tokens --repeats 1 --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_tokens_per_s"])')
  r=$(OMP_NUM_THREADS=1 "$work/run" "$name.bin" -z "$name.tokenizer.bin" -t 0 -n $((tokens + 2)) -i "t" 2>&1 >/dev/null |
        sed -n 's/achieved tok\/s: //p')
  printf 'round %d: npw %.1f tokens/s, run.c %.1f tokens/s, ratio %.2f\n' "$i" "$n" "$r" "$(awk -v a="$n" -v b="$r" 'BEGIN {print a / b}')"
  npw_rates+=("$n") runc_rates+=("$r")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mn=$(median "${npw_rates[@]}") mr=$(median "${runc_rates[@]}")
printf 'median: npw %.1f, run.c %.1f tokens/s, npw/run.c %.2f (load average %s)\n' "$mn" "$mr" \
  "$(awk -v a="$mn" -v b="$mr" 'BEGIN {print a / b}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
