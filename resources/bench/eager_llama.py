#!/usr/bin/env python3
# The eager PyTorch reference of `npw bench --suite runtime` (issue 17): Hugging Face's LLaMA
# forward (transformers' modeling_llama.py, eager attention) re-written in plain torch, float32,
# no_grad, on the weights of a llama2.c .bin checkpoint (the file the suite also gives run.c).
# It follows HF's ops one for one: RMSNorm in float32, rotate_half RoPE with cos/sin of
# cat(freqs, freqs), a KV cache grown by torch.cat, repeat_kv for grouped-query attention, an
# additive causal mask, softmax in float32, SwiGLU, logits for every position. (HF applies
# rotate_half to weights its converter permuted; applied to the stored weights it costs the same.)
#
#   eager_llama.py MODEL.bin --threads N --prompt-tokens P --decode-tokens D
#                  --eval-windows B --eval-seqlen L --repeats R
# Prints one JSON line: prefill / decode / eval tokens per second (best of R).
import argparse, json, math, struct, time

import numpy as np
import torch


def load_llama2c(path):
    with open(path, "rb") as f:
        dim, hidden, layers, heads, kv, vocab, seq = struct.unpack("7i", f.read(28))
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // heads
    data = np.memmap(path, dtype=np.float32, mode="r", offset=28)
    at = [0]

    def take(*shape):
        n = int(np.prod(shape))
        t = torch.from_numpy(np.array(data[at[0]:at[0] + n]).reshape(shape))
        at[0] += n
        return t

    w = {"embed": take(vocab, dim), "attn_norm": take(layers, dim), "wq": take(layers, heads * hd, dim),
         "wk": take(layers, kv * hd, dim), "wv": take(layers, kv * hd, dim), "wo": take(layers, dim, heads * hd),
         "ffn_norm": take(layers, dim), "w_gate": take(layers, hidden, dim), "w_down": take(layers, dim, hidden),
         "w_up": take(layers, hidden, dim), "final_norm": take(dim)}
    at[0] += seq * hd  # freq_cis_real and freq_cis_imag (unused: HF computes its own tables)
    w["lm_head"] = w["embed"] if shared else take(vocab, dim)
    cfg = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv=kv, vocab=vocab, seq=seq, hd=hd)
    return cfg, w


class EagerLlama:
    def __init__(self, cfg, w, eps=1e-5, theta=10000.0):
        self.c, self.eps = cfg, eps
        self.layers = [{k: w[k][l] for k in ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down")}
                       for l in range(cfg["layers"])]
        self.embed, self.final_norm, self.lm_head = w["embed"], w["final_norm"], w["lm_head"]
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, cfg["hd"], 2, dtype=torch.int64).float() / cfg["hd"]))

    def rms_norm(self, x, weight):  # LlamaRMSNorm
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(variance + self.eps))

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, ids, cache=None):
        B, T = ids.shape
        past = 0 if cache is None or cache[0] is None else cache[0][0].shape[2]
        pos = torch.arange(past, past + T).float()
        freqs = torch.outer(pos, self.inv_freq)  # LlamaRotaryEmbedding
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = None
        if T > 1:
            mask = torch.full((T, past + T), float("-inf")).triu(past + 1)[None, None]
        x = torch.nn.functional.embedding(ids, self.embed)
        nh, nkv, hd = self.c["heads"], self.c["kv"], self.c["hd"]
        for l, L in enumerate(self.layers):
            h = self.rms_norm(x, L["attn_norm"])
            q = torch.nn.functional.linear(h, L["wq"]).view(B, T, nh, hd).transpose(1, 2)
            k = torch.nn.functional.linear(h, L["wk"]).view(B, T, nkv, hd).transpose(1, 2)
            v = torch.nn.functional.linear(h, L["wv"]).view(B, T, nkv, hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if cache is not None:
                if cache[l] is not None:
                    k = torch.cat([cache[l][0], k], dim=-2)
                    v = torch.cat([cache[l][1], v], dim=-2)
                cache[l] = (k, v)
            if nh != nkv:  # repeat_kv
                k = k[:, :, None].expand(B, nkv, nh // nkv, k.shape[2], hd).reshape(B, nh, k.shape[2], hd)
                v = v[:, :, None].expand(B, nkv, nh // nkv, v.shape[2], hd).reshape(B, nh, v.shape[2], hd)
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
            if mask is not None:
                scores = scores + mask
            probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            attn = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, nh * hd)
            x = x + torch.nn.functional.linear(attn, L["wo"])
            h = self.rms_norm(x, L["ffn_norm"])
            x = x + torch.nn.functional.linear(
                torch.nn.functional.silu(torch.nn.functional.linear(h, L["w_gate"])) * torch.nn.functional.linear(h, L["w_up"]),
                L["w_down"])
        x = self.rms_norm(x, self.final_norm)
        return torch.nn.functional.linear(x, self.lm_head).float()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--decode-tokens", type=int, default=128)
    p.add_argument("--eval-windows", type=int, default=4)
    p.add_argument("--eval-seqlen", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg, w = load_llama2c(a.model)
    model = EagerLlama(cfg, w)
    g = torch.Generator().manual_seed(1234)
    prompt = torch.randint(0, cfg["vocab"], (1, a.prompt_tokens), generator=g)
    windows = torch.randint(0, cfg["vocab"], (a.eval_windows, a.eval_seqlen), generator=g)
    prefill = decode = evaluation = 0.0
    with torch.no_grad():
        for _ in range(a.repeats):
            cache = [None] * cfg["layers"]
            t0 = time.perf_counter()
            logits = model.forward(prompt, cache)
            t1 = time.perf_counter()
            token = logits[:, -1].argmax(-1, keepdim=True)
            for _ in range(a.decode_tokens):  # greedy, as HF's generate
                token = model.forward(token, cache)[:, -1].argmax(-1, keepdim=True)
            t2 = time.perf_counter()
            model.forward(windows)
            t3 = time.perf_counter()
            prefill = max(prefill, a.prompt_tokens / (t1 - t0))
            decode = max(decode, a.decode_tokens / (t2 - t1))
            evaluation = max(evaluation, windows.numel() / (t3 - t2))
    print(json.dumps({"prefill_tokens_per_s": prefill, "decode_tokens_per_s": decode, "eval_tokens_per_s": evaluation,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
