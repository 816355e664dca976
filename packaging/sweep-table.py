#!/usr/bin/env python3
"""Markdown tables from `npw sweep --csv` files (one per model, named MODEL.csv): one table
per model and evaluation set, methods × ratios, perplexity mean ± sample std over seeds and the
mean achieved ratio; zero-shot rows (acc) as accuracy."""
import csv
import math
import os
import sys
from collections import OrderedDict

METHOD_ORDER = ["numerical", "numerical-nocomp", "flap", "wanda-sp", "magnitude", "random"]


def mean_std(values):
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return m, s


def number(text):
    return float(text) if text not in ("", "nan") else math.nan


for path in sys.argv[1:]:
    model = os.path.splitext(os.path.basename(path))[0]
    with open(path) as f:
        rows = list(csv.DictReader(f))
    groups = OrderedDict()  # (eval, method, ratio) -> rows over seeds
    for r in rows:
        groups.setdefault((r["eval"], r["method"], float(r["ratio"])), []).append(r)
    for eval_set in OrderedDict.fromkeys(r["eval"] for r in rows):
        accuracy = not math.isnan(number(rows[[r["eval"] for r in rows].index(eval_set)].get("acc", "")))
        field = "acc" if accuracy else "ppl"
        keys = [k for k in groups if k[0] == eval_set]
        ratios = sorted({k[2] for k in keys if k[1] != "dense"})
        methods = sorted({k[1] for k in keys if k[1] != "dense"},
                         key=lambda m: METHOD_ORDER.index(m) if m in METHOD_ORDER else 99)
        seeds = max(len(groups[k]) for k in keys if k[1] != "dense")
        dense = groups.get((eval_set, "dense", 0.0))
        head = f"**{model}**, {eval_set}"
        if dense:
            head += f" (dense {field} {number(dense[0][field]):.{3 if accuracy else 2}f})"
        what = "accuracy" if accuracy else "perplexity"
        print(head + f"; {what}, mean ± std over {seeds} seeds (achieved ratio)\n")
        print("| method | " + " | ".join(f"ρ = {r:g}" for r in ratios) + " |")
        print("| --- |" + " --- |" * len(ratios))
        for m in methods:
            cells = []
            for ratio in ratios:
                g = groups.get((eval_set, m, ratio))
                if not g:
                    cells.append("—")
                    continue
                mean, std = mean_std([number(r[field]) for r in g])
                achieved = sum(float(r["achieved_ratio"]) for r in g) / len(g)
                digits = 3 if accuracy else 2
                cells.append(f"{mean:.{digits}f} ± {std:.{digits}f} ({achieved:.3f})")
            print(f"| {m} | " + " | ".join(cells) + " |")
        print()
