#!/usr/bin/env python3
"""The manual's Table 1 in miniature (resources/manual/benchmarks.md) from packaging/studies/baselines-table.sh's CSVs: per model and method the
mean perplexity over seeds (± sample std when several) and the mean achieved ratio at each ρ.
Usage: baselines_table.py DIR (table-lm.csv, table-lm-gqa.csv, table-stories.csv, table-baby.csv)."""
import csv, statistics, sys, os
from collections import defaultdict

MODELS = [("lm", "demo:lm"), ("lm-gqa", "demo:lm-gqa"), ("baby", "babyllama"), ("stories", "stories260K")]
METHODS = ["numerical", "flap", "llm-pruner", "slicegpt", "block-influence"]
RATIOS = ["0.1", "0.2", "0.3", "0.4", "0.5"]

def main(d):
    for key, name in MODELS:
        path = os.path.join(d, f"table-{key}.csv")
        if not os.path.exists(path):
            continue
        rows = list(csv.DictReader(open(path)))
        ppl, ach, seeds = defaultdict(list), defaultdict(list), set()
        dense = None
        for r in rows:
            if r["method"] == "dense":
                dense = float(r["ppl"])
                continue
            k = (r["method"], str(float(r["ratio"])))
            ppl[k].append(float(r["ppl"]))
            ach[k].append(float(r["achieved_ratio"]))
            seeds.add(r["seed"])
        print(f"**{name}** (dense {dense:.2f}; {len(seeds)} seed{'s' if len(seeds) > 1 else ''}): perplexity (achieved ratio)\n")
        print("| method | " + " | ".join("ρ " + x for x in RATIOS) + " |")
        print("| --- |" + " --- |" * len(RATIOS))
        for m in METHODS:
            cells = []
            for x in RATIOS:
                k = (m, str(float(x)))
                if k not in ppl:
                    cells.append("–")
                    continue
                p = ppl[k]
                sd = f" ± {statistics.stdev(p):.2f}" if len(p) > 1 else ""
                cells.append(f"{statistics.mean(p):.2f}{sd} ({statistics.mean(ach[k]):.3f})")
            print(f"| {m} | " + " | ".join(cells) + " |")
        print()

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/baselines")
