#!/usr/bin/env python3
# The test and benchmark half of packaging/gpu-check.sh (which builds npw and calls this): drives
# the `npw` CLI (no Qt on a GPU machine) on synthetic LLaMAs written by
# tests/fixtures/make_synthetic_hf_llama.py and compares each CUDA result with the CPU's.
# Needs Python 3 with numpy only (PyTorch is not imported: safetensors files are read here).
#
#   gpu_check.py --npw PATH --json FILE --deadline UNIX_SECONDS [--dry-run] [--work DIR] [--bench-size 1b|tiny]
#
# The JSON is rewritten after every check, so a run stopped at its time limit still says what
# passed. Dry run (no GPU): each check runs its CPU side twice and compares the two (the same
# comparison code, so a broken reader or tolerance shows here); its status is "skipped" with the
# reason and the dry comparison's outcome. Exit 0 when nothing failed and nothing was cut off by
# the time limit.
import argparse, json, math, os, struct, subprocess, sys, time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_MODEL = os.path.join(HERE, "..", "tests", "fixtures", "make_synthetic_hf_llama.py")

# Tolerances, each with why (relative: |a − b| / |b|; "of max": max |a − b| / max |b|).
TOL = {
    # float32 on both: different summation orders (cuBLAS vs OpenBLAS); 1e-5 would do on the
    # tiny model, 1e-4 leaves room for longer reductions. TF32 is off for LibTorch's matmuls.
    "ppl_float32_rel": 1e-4,
    # bfloat16 weights and activations against float32: 8 bits of mantissa, ~0.4 % per rounding;
    # the tiny random model's perplexity moved < 0.5 % in trials on the CPU with bf16 casts.
    "ppl_bf16_rel": 2e-2,
    # Calibration statistics: float32 activations accumulated in float64 on each device.
    "stats_of_max": 1e-5,
    # Scores come from the statistics through float64 solves: the statistics' 1e-5 bound, again.
    "scores_of_max": 1e-4,
    # Layer-wise and whole-model evaluation run the same float32 blocks on one device.
    "layerwise_rel": 1e-5,
}


class Report:
    def __init__(self, path, meta):
        self.path = path
        self.data = dict(meta)
        self.data.setdefault("checks", [])
        self.data.setdefault("bench", {})
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=False, allow_nan=False, default=str)
        os.replace(tmp, self.path)

    def check(self, name, status, **fields):
        entry = {"name": name, "status": status}
        entry.update(fields)
        self.data["checks"].append(entry)
        self.write()
        print(f"gpu-check: {name}: {status}" + (f" ({fields.get('reason') or fields.get('detail') or ''})"
                                                 if fields.get("reason") or fields.get("detail") else ""), flush=True)


class TimeUp(Exception):
    pass


class Runner:
    def __init__(self, args):
        self.npw = args.npw
        self.deadline = args.deadline
        self.dry = args.dry_run
        self.work = args.work
        self.log = open(os.path.join(args.work, "commands.log"), "a")

    def remaining(self):
        return self.deadline - time.time()

    def run(self, argv, env=None, expect_ok=True, cap=240):
        left = self.remaining()
        if left < 5:
            raise TimeUp()
        t0 = time.time()
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.log.write(f"$ {' '.join(argv)}\n")
        self.log.flush()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=min(cap, left))
        except subprocess.TimeoutExpired:
            raise TimeUp()
        self.log.write(p.stderr[-4000:] + f"\n[exit {p.returncode}, {time.time() - t0:.1f} s]\n")
        self.log.flush()
        if expect_ok and p.returncode != 0:
            raise RuntimeError(f"{os.path.basename(argv[0])} {argv[1]} exited {p.returncode}: {p.stderr.strip()[-600:]}")
        return p, time.time() - t0

    def npw_json(self, *argv, env=None, cap=240):
        p, secs = self.run([self.npw, *argv, "--json"], env=env, cap=cap)
        return json.loads(p.stdout), secs


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    kinds = {"F64": np.float64, "F32": np.float32, "I64": np.int64, "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        if meta["dtype"] not in kinds:
            out[name] = ("unsupported dtype " + meta["dtype"], meta["shape"])
            continue
        out[name] = np.frombuffer(body[a:b], dtype=kinds[meta["dtype"]]).reshape(meta["shape"])
    return out


def compare_tensor_files(a_path, b_path):
    """max over tensors of max|a-b| / max|b|, and the names or shapes that differ."""
    a, b = read_safetensors(a_path), read_safetensors(b_path)
    if sorted(a) != sorted(b):
        return math.inf, f"tensor names differ: {sorted(set(a) ^ set(b))[:5]}"
    worst, where = 0.0, ""
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, tuple) or isinstance(y, tuple):
            return math.inf, f"{name}: {x[0] if isinstance(x, tuple) else y[0]}"
        if x.shape != y.shape:
            return math.inf, f"{name}: shape {list(x.shape)} vs {list(y.shape)}"
        if x.size == 0:
            continue
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        scale = max(float(np.max(np.abs(y64))), 1e-300)
        err = float(np.max(np.abs(x64 - y64))) / scale
        if not math.isfinite(err) or err > worst or not where:
            worst, where = err, name
    return worst, where


def rel(a, b):
    return abs(a - b) / abs(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--npw", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--deadline", type=float, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--bench-size", default="1b", choices=["1b", "tiny"])
    ap.add_argument("--meta", default="{}", help="JSON object merged into the report (the inventory)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    meta = json.loads(args.meta) if args.meta.startswith("{") else json.load(open(args.meta))
    meta["mode"] = "dry-run (CPU only)" if args.dry_run else "cuda"
    meta["tolerances"] = TOL
    rep = Report(args.json, meta)
    r = Runner(args)
    dev = "cpu" if args.dry_run else "cuda"
    dry_reason = "no CUDA device: dry run (the CPU side ran twice and was compared with itself)"

    def outcome(name, ok, detail, **fields):
        if args.dry_run:
            rep.check(name, "skipped", reason=dry_reason, dry_comparison="pass" if ok else "fail", detail=detail, **fields)
        else:
            rep.check(name, "pass" if ok else "fail", detail=detail, **fields)
        return ok

    failures = 0

    def guarded(name, fn):
        nonlocal failures
        t0 = time.time()
        try:
            if not fn():
                failures += 1
        except TimeUp:
            rep.check(name, "skipped", reason="time limit reached")
            raise
        except Exception as e:  # a crash of npw or of a reader: the check failed, the run goes on
            failures += 1
            rep.check(name, "fail", detail=str(e)[-800:], seconds=round(time.time() - t0, 1))

    tiny = os.path.join(args.work, "tiny")
    ids = os.path.join(tiny, "ids.txt")
    py = sys.executable

    def make_tiny():
        if not os.path.exists(os.path.join(tiny, "model.safetensors")):
            r.run([py, MAKE_MODEL, "tiny", tiny, "8192"], cap=120)
        return True

    # Dry runs happen on small shared CI machines: one thread (two OpenMP threads on two busy
    # cores wait on each other: a tiny model's evaluation took 45 s instead of 1) and 4 windows.
    if args.dry_run:
        os.environ.setdefault("NPW_NUM_THREADS", "1")
    window = ["--ids", ids, "--seqlen", "128", "--max-windows", "4" if args.dry_run else "16"]
    ppl = {}

    def forward_float32():
        a, _ = r.npw_json("eval", tiny, *window, "--device", "cpu", "--dtype", "float32")
        b, _ = r.npw_json("eval", tiny, *window, "--device", dev, "--dtype", "float32")
        ppl["cpu"], ppl[dev + "_f32"] = a["ppl"], b["ppl"]
        e = rel(b["ppl"], a["ppl"])
        return outcome("forward_float32", e <= TOL["ppl_float32_rel"], f"perplexity cpu {a['ppl']:.6f}, {b['device']} "
                       f"{b['ppl']:.6f}, relative difference {e:.2e} (tolerance {TOL['ppl_float32_rel']:g})",
                       relative_difference=e)

    def forward_bf16():
        if args.dry_run:
            rep.check("forward_bfloat16", "skipped", reason="no CUDA device: dry run (npw runs bfloat16 on CUDA only)")
            return True
        b, _ = r.npw_json("eval", tiny, *window, "--device", dev, "--dtype", "bfloat16")
        e = rel(b["ppl"], ppl["cpu"])
        return outcome("forward_bfloat16", e <= TOL["ppl_bf16_rel"], f"perplexity cpu float32 {ppl['cpu']:.6f}, "
                       f"{b['device']} {b['ppl']:.6f}, relative difference {e:.2e} (tolerance {TOL['ppl_bf16_rel']:g})",
                       relative_difference=e)

    prune_common = ["--method", "numerical", "--ratio", "0.3", "--calib", ids, "--calib-ids", "--nsamples", "8",
                    "--seqlen", "128", "--dtype", "float32"]
    out = {}

    def prune_both():
        for side, d in (("a", "cpu"), ("b", dev)):
            base = os.path.join(args.work, "prune-" + side)
            subprocess.run(["rm", "-rf", base])
            os.makedirs(base)
            res, secs = r.npw_json("prune", tiny, *prune_common, "--device", d, "--out", os.path.join(base, "model"),
                                   "--save-stats", os.path.join(base, "stats.safetensors"),
                                   "--save-scores", os.path.join(base, "scores.safetensors"))
            out[side] = (base, res, secs)
        return True

    def calibration_stats():
        e, where = compare_tensor_files(os.path.join(out["b"][0], "stats.safetensors"), os.path.join(out["a"][0], "stats.safetensors"))
        return outcome("calibration_statistics", e <= TOL["stats_of_max"], f"max |Δ| / max |cpu| = {e:.2e} "
                       f"(worst: {where}; tolerance {TOL['stats_of_max']:g})", difference_of_max=e)

    def scores_and_masks():
        e, where = compare_tensor_files(os.path.join(out["b"][0], "scores.safetensors"), os.path.join(out["a"][0], "scores.safetensors"))
        # The masks: the exports' tensors must have the same shapes (which units were kept
        # decides the sizes) and the same values (a different unit kept changes them at once).
        m, mwhere = compare_tensor_files(os.path.join(out["b"][0], "model", "model.safetensors"),
                                         os.path.join(out["a"][0], "model", "model.safetensors"))
        ok = e <= TOL["scores_of_max"] and m <= TOL["scores_of_max"]
        return outcome("scores_and_masks", ok, f"scores max |Δ| / max = {e:.2e} (worst {where}); pruned weights "
                       f"{m:.2e} (worst {mwhere}); tolerance {TOL['scores_of_max']:g}; prune {out['a'][2]:.1f} s cpu, "
                       f"{out['b'][2]:.1f} s {dev}", scores_difference=e, weights_difference=m)

    def prune_export_eval():
        a, _ = r.npw_json("eval", os.path.join(out["a"][0], "model"), *window, "--device", "cpu", "--dtype", "float32")
        b, _ = r.npw_json("eval", os.path.join(out["b"][0], "model"), *window, "--device", dev, "--dtype", "float32")
        ppl["pruned_cpu"] = a["ppl"]
        e = rel(b["ppl"], a["ppl"])
        return outcome("prune_export_eval", e <= TOL["ppl_float32_rel"] and a["ppl"] > ppl["cpu"] * 0.5,
                       f"pruned perplexity cpu {a['ppl']:.6f}, {b['device']} {b['ppl']:.6f} (dense {ppl['cpu']:.6f}), "
                       f"relative difference {e:.2e}", relative_difference=e)

    def layerwise_eval():
        b, _ = r.npw_json("eval", tiny, *window, "--layerwise", "--device", dev, "--dtype", "float32")
        e = rel(b["ppl"], ppl[dev + "_f32"])
        e_cpu = rel(b["ppl"], ppl["cpu"])
        ok = e <= TOL["layerwise_rel"] and e_cpu <= TOL["ppl_float32_rel"]
        return outcome("layerwise_eval", ok, f"layer-wise {b['device']} {b['ppl']:.6f} ({b.get('path')}) vs whole-model "
                       f"{e:.2e}, vs cpu {e_cpu:.2e}", relative_difference=e)

    def layerwise_prune():
        # The bounded road with its blocks on the device (the weights stay mapped on the CPU, one
        # block copied to the GPU at a time): its scores and its export against the CPU's in-RAM prune.
        base = os.path.join(args.work, "prune-layerwise")
        subprocess.run(["rm", "-rf", base])
        os.makedirs(base)
        res, secs = r.npw_json("prune", tiny, *prune_common, "--layerwise", "--device", dev,
                               "--out", os.path.join(base, "model"), "--save-scores", os.path.join(base, "scores.safetensors"))
        e, where = compare_tensor_files(os.path.join(base, "scores.safetensors"), os.path.join(out["a"][0], "scores.safetensors"))
        ev, _ = r.npw_json("eval", os.path.join(base, "model"), *window, "--device", "cpu", "--dtype", "float32")
        p = rel(ev["ppl"], ppl["pruned_cpu"])
        blocks_on = res.get("road", {}).get("blocks_on", "")
        ok = e <= TOL["scores_of_max"] and p <= TOL["ppl_float32_rel"] and blocks_on.startswith(dev)
        return outcome("layerwise_prune", ok, f"layer-wise prune, blocks on {blocks_on}: scores max |Δ| / max = {e:.2e} "
                       f"(worst {where}) against the CPU's in-RAM prune; its export's perplexity {ev['ppl']:.6f} vs "
                       f"{ppl['pruned_cpu']:.6f} ({p:.2e}); {secs:.1f} s", scores_difference=e, relative_difference=p)

    def oom_message():
        if args.dry_run:
            rep.check("out_of_memory_message", "skipped", reason="no CUDA device: dry run")
            return True
        # 1e-6 of the GPU's memory (under 200 kB) cannot hold the tiny model's weights.
        p, _ = r.run([r.npw, "eval", tiny, *window, "--device", "cuda", "--dtype", "float32"],
                     env={"NPW_CUDA_MEMORY_FRACTION": "0.000001"}, expect_ok=False, cap=120)
        err = p.stderr.strip()
        ok = p.returncode == 1 and "out of memory" in err and "internal error" not in err and "allocate" in err
        return outcome("out_of_memory_message", ok, f"exit {p.returncode}: {err[-400:]}", exit_code=p.returncode)

    def bench():
        size = "tiny" if args.dry_run else args.bench_size
        model = tiny
        if size == "1b":
            model = os.path.join(args.work, "synthetic-1b")
            if not os.path.exists(os.path.join(model, "model.safetensors")):
                _, secs = r.run([py, MAKE_MODEL, "1b", model, "8192"], cap=180)
                rep.data["bench"]["write_1b_seconds"] = round(secs, 1)
        bench_ids = os.path.join(model, "ids.txt")
        rows = []
        sides = [("cpu", "float32")] + ([] if args.dry_run else [("cuda", "float32"), ("cuda", "bfloat16")])
        for d, dt in sides:
            ev, _ = r.npw_json("eval", model, "--ids", bench_ids, "--seqlen", "512", "--max-windows",
                               "4" if d == "cpu" else "16", "--device", d, "--dtype", dt)
            bn, _ = r.npw_json("bench", model, "--prompt-tokens", "128", "--decode-tokens", "16" if d == "cpu" else "64",
                               "--repeats", "2", "--device", d, "--dtype", dt)
            rows.append({"device": ev["device"], "dtype": dt, "eval_tokens_per_s": ev["tokens_per_second"],
                         "eval_ppl": ev["ppl"], "prefill_tokens_per_s": bn["prefill_tokens_per_s"],
                         "decode_tokens_per_s": bn["decode_tokens_per_s"], "peak_memory_mib": bn.get("peak_memory_mib")})
            rep.data["bench"].update({"shape": size, "rows": rows})
            rep.write()
        if len(rows) > 1:
            rep.data["bench"]["cuda_float32_over_cpu"] = {
                k: rows[1][k] / rows[0][k] for k in ("eval_tokens_per_s", "prefill_tokens_per_s", "decode_tokens_per_s")}
            rep.write()
        rep.check("benchmark", "pass", detail="; ".join(
            f"{x['device']}: eval {x['eval_tokens_per_s']:.0f} t/s, decode {x['decode_tokens_per_s']:.1f} t/s" for x in rows))
        return True

    steps = [("synthetic_models", make_tiny), ("forward_float32", forward_float32), ("forward_bfloat16", forward_bf16),
             ("prune_cpu_and_device", prune_both), ("calibration_statistics", calibration_stats),
             ("scores_and_masks", scores_and_masks), ("prune_export_eval", prune_export_eval),
             ("layerwise_eval", layerwise_eval), ("layerwise_prune", layerwise_prune),
             ("out_of_memory_message", oom_message), ("benchmark", bench)]
    done = set()
    try:
        for name, fn in steps:
            if name in ("calibration_statistics", "scores_and_masks", "prune_export_eval", "layerwise_prune") and \
                    "prune_cpu_and_device" not in done:
                rep.check(name, "skipped", reason="the prune step failed")
                continue
            if name == "layerwise_prune" and "prune_export_eval" not in done:
                rep.check(name, "skipped", reason="the pruned export's evaluation did not run")
                continue
            if name in ("forward_bfloat16", "layerwise_eval", "prune_export_eval") and "forward_float32" not in done:
                rep.check(name, "skipped", reason="the float32 forward check did not run")
                continue
            before = failures
            guarded(name, fn)
            if failures == before:
                done.add(name)
    except TimeUp:
        left = [n for n, _ in steps if n not in done and not any(c["name"] == n for c in rep.data["checks"])]
        for n in left:
            rep.check(n, "skipped", reason="time limit reached")
    # A check cut off by the time limit did not pass: the run says so in its exit status too.
    cut = [c["name"] for c in rep.data["checks"] if c.get("reason") == "time limit reached"]
    rep.data["failures"] = failures
    rep.data["cut_by_time_limit"] = cut
    rep.data["finished"] = True
    rep.write()
    return 1 if failures or cut else 0


if __name__ == "__main__":
    sys.exit(main())
