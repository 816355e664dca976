#!/usr/bin/python3
# The defaults study's tables (resources/manual/ranking-and-defaults.md) from `npw sweep --csv` (packaging/studies/study.sh): perplexity per
# method and ρ, mean over the calibration seeds ± their sample standard deviation (when > 1
# seed), achieved ratio in parentheses. Usage: study_table.py study-MODEL.csv. For an image sweep's
# CSV (demo:c2i, no `ppl` column) the held-out token perplexity (`token_ppl`) is tabulated.
import csv, collections, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
metric = 'ppl' if 'ppl' in rows[0] else 'token_ppl'
for r in rows:
    r.setdefault('seed', '0'); r['ratio'] = str(float(r['ratio'])) if r['method'] != 'dense' else '0'
order = ["numerical-lstar-rel", "numerical-lstar", "numerical-z", "flap", "wanda-sp", "magnitude"]
names = {"numerical-lstar-rel": "**numerical (default: lstar-rel)**"}
ppl = collections.defaultdict(list); ach = collections.defaultdict(list)
for r in rows:
    ppl[(r['method'], r['ratio'])].append(float(r[metric])); ach[(r['method'], r['ratio'])].append(float(r['achieved_ratio']))
ratios = sorted({r['ratio'] for r in rows if r['method'] != 'dense'}, key=float)
seeds = len({r['seed'] for r in rows})
print(f"dense {ppl[('dense', '0')][0]:.2f}; {seeds} seed(s)")
print("| method | " + " | ".join("ρ = " + x for x in ratios) + " |")
print("| --- |" + " --- |" * len(ratios))
for m in order:
    if (m, ratios[0]) not in ppl: continue
    cells = []
    for x in ratios:
        v = ppl[(m, x)]; n = len(v); mean = sum(v) / n
        sd = math.sqrt(sum((a - mean) ** 2 for a in v) / (n - 1)) if n > 1 else None
        cell = f"{mean:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")
        cells.append(cell + f" ({sum(ach[(m, x)]) / n:.3f})")
    print(f"| {names.get(m, m)} | " + " | ".join(cells) + " |")
