#!/usr/bin/env python3
"""Markdown tables from `npw sweep --json` files: one table per model and evaluation set,
methods × ratios, perplexity mean ± std over seeds and the mean achieved ratio."""
import json
import sys
from collections import OrderedDict

METHOD_ORDER = ["numerical", "numerical-nocomp", "flap", "wanda-sp", "magnitude", "random"]

for path in sys.argv[1:]:
    with open(path) as f:
        sweep = json.load(f)
    by_eval = OrderedDict()
    for row in sweep["summary"]:
        by_eval.setdefault(row["eval"], []).append(row)
    for eval_set, rows in by_eval.items():
        dense = [r for r in rows if r["method"] == "dense"]
        pruned = [r for r in rows if r["method"] != "dense"]
        ratios = sorted({r["ratio"] for r in pruned})
        methods = sorted({r["method"] for r in pruned},
                         key=lambda m: METHOD_ORDER.index(m) if m in METHOD_ORDER else 99)
        seeds = max(r["seeds"] for r in pruned)
        head = f"**{sweep['model']}**, {eval_set}"
        if dense:
            head += f" (dense ppl {dense[0]['ppl_mean']:.2f})"
        print(head + f"; perplexity, mean ± std over {seeds} seeds (achieved ratio)\n")
        print("| method | " + " | ".join(f"ρ = {r:g}" for r in ratios) + " |")
        print("| --- |" + " --- |" * len(ratios))
        for m in methods:
            cells = []
            for ratio in ratios:
                hit = [r for r in pruned if r["method"] == m and r["ratio"] == ratio]
                if not hit:
                    cells.append("—")
                    continue
                r = hit[0]
                cells.append(f"{r['ppl_mean']:.2f} ± {r['ppl_std']:.2f} ({r['achieved_ratio_mean']:.3f})")
            print(f"| {m} | " + " | ".join(cells) + " |")
        print()
