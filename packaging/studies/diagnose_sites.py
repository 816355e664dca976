#!/usr/bin/python3
"""Per-site diagnosis of the numerical score's cross-layer order (issue 15), independent of npw's
C++ code: numpy float64 from a statistics file (`npw prune --save-stats`) and the model's weights.

For every scored site (o_proj / down_proj input of every layer) it prints
  D, unit width (channels per attention unit), c = 1ᵀA⁻¹1, κ(A), λc at λ = 1e-4 and at the relative
  default (λ_rel / median c), and, for removing the share ρ of the site's units in the paper's
  within-layer order (that of −A⁻¹1, unit = mean):
  relaxed  = ρ²D²/c = min (1−z)ᵀA(1−z) over real z with Σz = (1−ρ)D: what the relaxed score's
             cross-layer comparison believes removing ρ of the site costs (λc → 0);
  binary   = 1_pᵀA1_p = ‖X·ΔW‖²/N of the binary mask without compensation;
  lstar    = Theorem 3's L* of that mask (compensated; γ = 0.01 relative, as npw), same units;
  gap      = binary / relaxed;
  resid    = the residual stream's energy after the site: mean ‖embedding row‖² + Σ output energies
             tr(WᵀGW) of the sites so far (what npw's lstar-rel ranking divides L* by).
Usage: diagnose_sites.py STATS.safetensors WEIGHTS(HF directory | llama2c .bin) RHO [LAMBDA_REL]
"""
import json, struct, sys
import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        dt = {"F64": np.float64, "F32": np.float32, "I64": np.int64, "I32": np.int32, "F16": np.float16, "BF16": None}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            f.seek(base + b)
            raw = f.read(e - b)
            if info["dtype"] == "BF16":
                a = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
                arr = a.view(np.float32)
            else:
                arr = np.frombuffer(raw, dt[info["dtype"]])
            out[name] = arr.reshape(info["shape"]).astype(np.float64)
    return out


def read_llama2c(path):
    with open(path, "rb") as f:
        dim, hidden, layers, heads, kv, vocab, seq = struct.unpack("<7i", f.read(28))
        w = np.frombuffer(f.read(), np.float32).astype(np.float64)
    vocab = abs(vocab)
    hd = dim // heads
    off = 0

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = w[off:off + n].reshape(shape)
        off += n
        return a
    emb = take(vocab, dim); take(layers, dim)
    take(layers, heads * hd, dim); take(layers, kv * hd, dim); take(layers, kv * hd, dim)
    wo = take(layers, dim, heads * hd)
    take(layers, dim); take(layers, hidden, dim)
    w2 = take(layers, dim, hidden)
    out = {"model.embed_tokens.weight": emb}
    for l in range(layers):
        out[f"model.layers.{l}.self_attn.o_proj.weight"] = wo[l]
        out[f"model.layers.{l}.mlp.down_proj.weight"] = w2[l]
    return out, heads, kv


def main():
    stats_path, weights_path, rho = sys.argv[1], sys.argv[2], float(sys.argv[3])
    lambda_rel = float(sys.argv[4]) if len(sys.argv) > 4 else 4.0
    stats = read_safetensors(stats_path)
    if weights_path.endswith(".bin"):
        weights, heads, kv = read_llama2c(weights_path)
    else:  # a Hugging Face directory
        import os
        weights = read_safetensors(os.path.join(weights_path, "model.safetensors"))
        cfg = json.load(open(os.path.join(weights_path, "config.json")))
        heads = cfg["num_attention_heads"]
        kv = cfg.get("num_key_value_heads", heads)
    layers = sorted({int(k.split(".")[1]) for k in stats if k.startswith("layers.")})
    rows = []
    emb = weights.get("model.embed_tokens.weight", weights.get("tok_embeddings.weight"))
    resid = float((emb ** 2).sum(1).mean()) if emb is not None else float("nan")
    for l in layers:
        for site, wname in (("attn", f"model.layers.{l}.self_attn.o_proj.weight"), ("mlp", f"model.layers.{l}.mlp.down_proj.weight")):
            key = f"layers.{l}.{site}.gram"
            if key not in stats or wname not in weights:
                continue
            n = float(stats[f"layers.{l}.{site}.tokens"].reshape(-1)[0])
            g = stats[key] / n
            W = weights[wname].T  # paper's W: [D, out]
            D = W.shape[0]
            A = (W @ W.T) * g
            ainv1 = np.linalg.solve(A, np.ones(D))
            c = ainv1.sum()
            ev = np.linalg.eigvalsh(A)
            kappa = ev[-1] / max(ev[0], 1e-300)
            # attention unit: a KV group (g query heads of D/heads channels), npw's default
            width = (heads // kv) * (D // heads) if site == "attn" else 1
            units = D // width
            unit_s = -ainv1.reshape(units, width).mean(1)  # higher = keep, as z
            order = np.argsort(unit_s, kind="stable")
            k = int(round(rho * units))
            removed = np.concatenate([np.arange(u * width, (u + 1) * width) for u in order[:k]]) if k else np.array([], int)
            m = np.zeros(D)
            m[removed] = 1
            binary = m @ A @ m
            H = 2 * g + 0.01 * np.mean(np.diag(2 * g)) * np.eye(D)
            Hinv = np.linalg.inv(H)
            if k:
                Wp = W[removed]
                lstar = 0.5 * np.trace(Wp.T @ np.linalg.solve(Hinv[np.ix_(removed, removed)], Wp))
            else:
                lstar = 0.0
            relaxed = (rho * D) ** 2 / c
            energy = np.trace(W.T @ g @ W)
            resid += energy  # the residual stream's energy after this site (cross terms neglected)
            rows.append(dict(layer=l, site=site, D=D, width=width, c=c, kappa=kappa, relaxed=relaxed, binary=binary,
                             lstar=lstar, energy=energy, resid=resid))
    med = np.median([r["c"] for r in rows])
    print(f"median c = {med:.4g}; lambda_rel {lambda_rel} -> lambda = {lambda_rel / med:.4g}; rho = {rho}")
    print("layer site    D width          c     kappa  lc(1e-4) lc(rel)    relaxed     binary      lstar   gap   out energy")
    for r in rows:
        print(f"{r['layer']:5d} {r['site']:4s} {r['D']:5d} {r['width']:5d} {r['c']:10.4g} {r['kappa']:9.3g} "
              f"{1e-4 * r['c']:8.3g} {lambda_rel * r['c'] / med:7.3g} {r['relaxed']:10.3g} {r['binary']:10.3g} "
              f"{r['lstar']:10.3g} {r['binary'] / r['relaxed']:5.0f} {r['energy']:10.3g} {r['resid']:8.3g} {r['lstar'] / r['resid']:10.3g}")


if __name__ == "__main__":
    main()
