#!/usr/bin/python3
"""Seed corpora for the libFuzzer harnesses: valid files made by the fixture writers
(tests/data, resources/demo) and small valid files built here, one folder per target, each
input in the harness's framing (fuzz_targets.h: a leading selector byte for config_json,
tokenizer_files and raw pickles). Files over MAX_BYTES are left out (a seed's size is the
default -max_len, and big seeds make every execution slow); the regression corpus is added too.

    /usr/bin/python3 tests/fuzz/make_seeds.py OUTDIR     # packaging/fuzz.sh runs it
"""

import glob
import os
import shutil
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import hostile_inputs as h  # noqa: E402

MAX_BYTES = 128 * 1024


def files(*patterns):
    found = []
    for pattern in patterns:
        found += sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True))
    return [f for f in found if os.path.isfile(f) and os.path.getsize(f) <= MAX_BYTES]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUTDIR")
    out = sys.argv[1]
    counts = {}

    def seed(target, name, data):
        folder = os.path.join(out, target)
        os.makedirs(folder, exist_ok=True)
        if len(data) > MAX_BYTES:
            return
        with open(os.path.join(folder, name.replace("/", "_")), "wb") as f:
            f.write(data)
        counts[target] = counts.get(target, 0) + 1

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def rel(path):
        return os.path.relpath(path, ROOT)

    shutil.rmtree(out, ignore_errors=True)

    for path in files("tests/data/**/*.safetensors", "resources/demo/**/*.safetensors"):
        seed("safetensors", rel(path), read(path))
    seed("safetensors", "built_f32", h.f32_tensor_file(metadata={"format": "pt"}))

    seed("gguf", "built_valid", h.gguf_valid())
    seed("gguf", "built_v2", h.gguf_valid()[:4] + struct.pack("<I", 2) + h.gguf_valid()[8:])
    seed("gguf", "built_no_tensors", h.gguf([h.gguf_kv("general.alignment", h.GGUF_U32, struct.pack("<I", 64))]))
    tokens = ["<unk>", "<s>", "</s>", "a", "b", "ab"]
    strings = struct.pack("<iQ", h.GGUF_STRING, len(tokens)) + b"".join(h.gguf_string(t) for t in tokens)
    seed("gguf", "built_llama_like", h.gguf(
        [h.gguf_kv("general.architecture", h.GGUF_STRING, h.gguf_string("llama")),
         h.gguf_kv("llama.block_count", h.GGUF_U32, struct.pack("<I", 1)),
         h.gguf_kv("llama.embedding_length", h.GGUF_U32, struct.pack("<I", 4)),
         h.gguf_kv("tokenizer.ggml.model", h.GGUF_STRING, h.gguf_string("llama")),
         h.gguf_kv("tokenizer.ggml.tokens", h.GGUF_ARRAY, strings),
         h.gguf_kv("tokenizer.ggml.token_type", h.GGUF_ARRAY,
                   struct.pack("<iQ", h.GGUF_I32, len(tokens)) + struct.pack("<6i", 2, 3, 3, 1, 1, 1)),
         h.gguf_kv("general.flag", h.GGUF_BOOL, b"\x01"),
         h.gguf_kv("general.count", h.GGUF_U64, struct.pack("<Q", 7))],
        [("token_embd.weight", [4, 6], 0, 0), ("output_norm.weight", [4], 1, 96)],
        struct.pack("<24f", *range(24)) + struct.pack("<4e", 1, 1, 1, 1)))

    for path in files("tests/data/**/*.pt"):
        data = read(path)
        seed("torch_checkpoint", rel(path), data)
        try:
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    if name.endswith("data.pkl"):
                        seed("torch_checkpoint", rel(path) + ".pkl", b"P" + archive.read(name))
        except (zipfile.BadZipFile, OSError, RuntimeError):
            pass
    seed("torch_checkpoint", "built_nan_dict", b"P" + h.pickle_nan_dict(8))
    seed("torch_checkpoint", "built_codecs", b"P" + h.pickle_codecs_bomb(4, 3))

    for path in files("tests/data/**/tokenizer.json", "resources/demo/**/tokenizer.json"):
        seed("tokenizer_json", rel(path), read(path))
    seed("tokenizer_json", "built_minimal", h.tokenizer_json().encode())
    seed("tokenizer_json", "built_split", h.tokenizer_json(pre_tokenizer=h.split_regex(r"\p{L}+|\s+")).encode())
    seed("tokenizer_json", "built_sequences", h.tokenizer_json(
        normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Prepend", "prepend": "_"}]},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Metaspace"}, {"type": "ByteLevel"}]},
        decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
                                                  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        added_tokens=[{"id": 5, "content": "<pad>", "special": True}]).encode())

    # config_json: the selector byte picks the kind (fuzz_targets.cpp).
    for path in files("tests/data/llama_ref/*/config.json", "resources/demo/lm*/config.json"):
        seed("config_json", rel(path), b"\x00" + read(path))
    for path in files("resources/demo/classifier/config.json", "tests/data/metrics/**/config.json"):
        seed("config_json", rel(path), b"\x01" + read(path))
    for path in files("resources/demo/c2i/config.json"):
        seed("config_json", rel(path), b"\x02" + read(path))
    for path in files("resources/demo/c2i/vq/config.json", "tests/data/llamagen_ref/vq_npw/config.json"):
        seed("config_json", rel(path), b"\x03" + read(path))
    for path in files("tests/data/**/model.safetensors.index.json"):
        seed("config_json", rel(path), b"\x04" + read(path))

    # A tiny valid llama2.c file: dim 8, hidden 4, 1 layer, 2 heads, 2 kv heads, vocab 4 (tied), seq 2.
    dim, hidden, layers, heads, kv, vocab, seq = 8, 4, 1, 2, 2, 4, 2
    head_dim = dim // heads
    floats = vocab * dim + layers * dim + 4 * layers * dim * dim + layers * dim + 3 * layers * hidden * dim + dim + 2 * seq * head_dim // 2
    seed("llama2c", "built_tiny", h.llama2c_header(dim, hidden, layers, heads, kv, vocab, seq) + struct.pack("<%df" % floats, *([0.5] * floats)))

    seed("idx", "built_plain", h.idx([2, 3], bytes(range(6))))
    seed("idx", "built_gzip", h.gzip_bytes(h.idx([2, 2, 2], bytes(range(8)))))
    for path in sorted(glob.glob("/usr/share/dataset-fashion-mnist/t10k-labels-idx1-ubyte.gz")):
        seed("idx", os.path.basename(path), read(path))

    for path in files("tests/data/sentencepiece/*.model"):
        seed("tokenizer_files", rel(path), b"\x01" + read(path))
    for path in files("tests/data/sentencepiece/*.bin"):
        seed("tokenizer_files", rel(path), b"\x02" + read(path))

    # tiktoken: the line format (a file of LLaMA-3's 128,000 ranks is past the length bound).
    import base64
    lines = [base64.b64encode(bytes([b])).decode() + " " + str(b) for b in range(256)]
    lines += [base64.b64encode(t.encode()).decode() + " " + str(256 + i) for i, t in enumerate(["ab", "abc", " the", "in"])]
    seed("tiktoken", "built_lines", ("\n".join(lines) + "\n").encode())
    seed("tiktoken", "built_crlf", ("\r\n".join(lines[:40]) + "\r\n").encode())

    for path in files("tests/data/sentencepiece/*.bin"):
        seed("tokenizer_bin", rel(path), read(path))

    # text_dataset: selector = kind (0 wikitext2, 1 ptb, 2 ptb-flap, 3 c4) | use (4: calibration)
    # | form << 3 (0 raw, 1 .jsonl, 2 .json.gz, 3 .txt.gz).
    raw = b" = Title = \n\n Some text , with <unk> tokens .\n \n@-@ more\r\n"
    for kind in range(3):
        seed("text_dataset", "built_raw_%d" % kind, bytes([kind]) + raw)
        seed("text_dataset", "built_raw_calib_%d" % kind, bytes([kind | 4]) + raw)
        seed("text_dataset", "built_txt_gz_%d" % kind, bytes([kind | (3 << 3)]) + h.gzip_bytes(raw))
    for path in files("tests/data/text_datasets/*.jsonl"):
        seed("text_dataset", rel(path), bytes([(1 << 3) | (1 if "ptb" in path else 0)]) + read(path))
    for path in files("tests/data/text_datasets/c4/*.json.gz"):
        seed("text_dataset", rel(path), bytes([3 | (2 << 3) | (4 if "train" in path else 0)]) + read(path))

    # zeroshot: selector % 8 = boolq, piqa, hellaswag, winogrande, arc_easy, arc_challenge, openbookqa, mc.
    items = [
        b'{"passage":"Sky is blue.","question":"is the sky blue","label":1}',
        b'{"goal":"Open a jar","sol1":"Twist the lid.","sol2":"Eat the lid.","label":0}',
        b'{"activity_label":"Baking cookies","ctx_a":"A woman [header] mixes flour.","ctx_b":"she THEN adds eggs",'
        b'"endings":[" Stirs it [title] Done ","bakes  it","eats it","leaves"],"label":"3"}',
        b'{"sentence":"The trophy did not fit in the case because the _ was too big.","option1":"trophy",'
        b'"option2":"case","answer":"1"}',
        b'{"id":"x","question":{"stem":"What melts ice?","choices":[{"text":"heat","label":"A"},'
        b'{"text":"cold","label":"B"}]},"answerKey":"A"}',
        b'{"id":"x","question":"Q?","choices":{"text":["one","two","three"],"label":["1","2","3"]},"answerKey":"3"}',
        b'{"id":"7","question_stem":"The sun is","choices":{"text":["hot","cold"],"label":["A","B"]},"answerKey":"A"}',
        b'{"context":"In the beginning","choices":[" God"," a stone"],"gold":0}',
    ]
    for kind, item in enumerate(items):
        seed("zeroshot", "built_kind_%d" % kind, bytes([kind]) + item + b"\n" + item + b"\n")
    for path in files("resources/demo/data/*.jsonl"):
        seed("zeroshot", rel(path), b"\x07" + read(path)[:8192])

    seed("manifest", "built_prune", b'{"format": "npw-pruned-model", "method": "flap", "ratio": 0.3, "lambda": null, '
                                    b'"layers": [{"layer": 0, "heads": 2}], "calibration": {"samples": 8}}')
    seed("manifest", "built_baseline", b'{"format": "npw-baseline", "method": "slicegpt", "ratio": 0.25}')

    seed("workspace", "built_minimal", (
        b'{"format": "npw-workspace", "version": 1, "model": "demo:lm", "device": "cpu",'
        b' "calibration": {"source": "demo", "source_is_ids": false, "samples": 8, "seqlen": 64, "seed": 0},'
        b' "prune": {"method": "numerical", "ratio": 0.2, "lambda": null, "lambda_rel": 1.0},'
        b' "knobs": {"rho": 0.3, "alpha": null, "alpha_mode": "paper", "lambda_rel": 1.0},'
        b' "current_method": "numerical", "scored": [{"method": "flap"}, {"method": "llm-pruner", "layer_ratio": null}],'
        b' "sweep_rows": [{"method": "flap", "ratio": 0.2, "calib_samples": 8, "calib_seqlen": 64, "lambda": null,'
        b' "seed": 0, "eval": "text", "achieved_ratio": 0.19, "achieved_ratio_model": 0.1, "ppl": 12.5, "nll": 2.5,'
        b' "bits_per_byte": null, "eval_tokens": 100}],'
        b' "mask": {"pruned_units": [[1], [0, 2]], "pruned_channels": [[], [3]]}, "images": null}'))

    regressions = os.path.join(HERE, "regressions")
    for target in os.listdir(regressions):
        folder = os.path.join(regressions, target)
        if os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                data = read(os.path.join(folder, name))
                if len(data) <= 16 * 1024:  # the big ones (bombs, deep nesting) cost seconds per run
                    seed(target, "regression_" + name, data)

    for target in sorted(counts):
        print("%-18s %4d seeds" % (target, counts[target]))


if __name__ == "__main__":
    main()
