#!/bin/bash
# Held-out damage of pruning one site alone (issue 15's diagnosis): for every layer l and site
# (attention, mlp), remove the share RHO of that site's parameters in the paper's within-layer
# order (every other layer protected, --only SITE), and print L* with and without compensation
# (one site: every ranking removes the same prefix of its z-order) and KL(dense || pruned) on the held-out set.
# Usage: site_damage.sh MODEL STATS LAYERS RHO EVAL_ARGS...   (EVAL_ARGS: e.g. --ids FILE --seqlen 401)
N=${NPW:-build/app/npw}
model=$1 stats=$2 layers=$3 rho=$4; shift 4
tmp=$(mktemp -d)
echo "layer site  kept/before  L*(comp)  L*(uncomp)  KL"
for l in $(seq 0 $((layers - 1))); do
  protect=$(seq -s, 0 $((layers - 1)) | tr ',' '\n' | grep -vx $l | paste -sd,)
  for site in attention mlp; do
    args=(--method numerical --ranking z --ratio $rho --stats $stats --only $site --out $tmp/p --json)
    [ -n "$protect" ] && args+=(--protect $protect)
    $N prune $model "${args[@]}" 2>/dev/null > $tmp/r.json || { echo "$l $site prune failed"; continue; }
    kl=$($N eval $tmp/p "$@" --reference $model --json 2>/dev/null | python3 -c 'import json,sys; print("%.4g" % json.load(sys.stdin)["kl"])')
    python3 - $l $site $kl $tmp/r.json <<'PY'
import json, sys
r = json.load(open(sys.argv[4]))["layers"][int(sys.argv[1])]
a = sys.argv[2] == "attention"
kept = f'{r["heads"] if a else r["channels"]}/{r["heads_before"] if a else r["channels_before"]}'
lc = r["attn_loss"] if a else r["mlp_loss"]
lu = r["attn_loss_uncompensated"] if a else r["mlp_loss_uncompensated"]
print(f"{sys.argv[1]:>5} {sys.argv[2][:4]:4} {kept:>12} {lc:9.3g} {lu:11.3g}  {sys.argv[3]}")
PY
  done
done
rm -rf $tmp
