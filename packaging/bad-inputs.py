#!/usr/bin/python3
"""The manual's bad-input table (resources/manual/hostile-files.md): writes hostile and broken inputs, runs the npw CLI
over each, and prints a markdown table of what was tried and what npw answered (exit code,
seconds, the first line of its message). Exit 1 with the file and field named is the contract;
exit 3 ("internal error") or a crash would be a bug.

    /usr/bin/python3 packaging/bad-inputs.py [--npw build/app/npw] > table.md

Needs a built npw and Debian's python3-torch (for the PyTorch checkpoints); everything is
written to a temporary folder and removed afterwards. Takes about a minute.
"""

import argparse
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
import hostile_inputs as h  # noqa: E402

# ---------------------------------------------------------------- a tiny valid LLaMA

VOCAB = ["<unk>", "<s>", "</s>", "\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["!", "\u2581a"]
CONFIG = {"model_type": "llama", "vocab_size": len(VOCAB), "hidden_size": 8, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 12, "max_position_embeddings": 64,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}


def tiny_weights(config, huge=()):
    """The tiny model's safetensors; tensors named in `huge` hold ±3e38 (finite, past float32's
    range once multiplied)."""
    d, v, inter = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    q = config["num_attention_heads"] * (d // config["num_attention_heads"])
    shapes = {"model.embed_tokens.weight": [v, d], "model.norm.weight": [d], "lm_head.weight": [v, d]}
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        shapes.update({p + "input_layernorm.weight": [d], p + "post_attention_layernorm.weight": [d],
                       p + "self_attn.q_proj.weight": [q, d], p + "self_attn.k_proj.weight": [q, d],
                       p + "self_attn.v_proj.weight": [q, d], p + "self_attn.o_proj.weight": [d, q],
                       p + "mlp.gate_proj.weight": [inter, d], p + "mlp.up_proj.weight": [inter, d],
                       p + "mlp.down_proj.weight": [d, inter]})
    header, data, seed = {}, b"", 12345
    for name in sorted(shapes):
        n = 1
        for s in shapes[name]:
            n *= s
        values = []
        for _ in range(n):
            seed = (seed * 1103515245 + 12345) % (1 << 31)
            value = 1.0 if name.endswith("norm.weight") else (seed / (1 << 31) - 0.5) * 0.2
            values.append((3e38 if value >= 0 else -3e38) if name in huge else value)
        raw = struct.pack("<%df" % n, *values)
        header[name] = {"dtype": "F32", "shape": shapes[name], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    return h.safetensors(header, data)


def tiny_tokenizer(**changes):
    doc = json.loads(h.tokenizer_json(vocab={t: i for i, t in enumerate(VOCAB)}, merges=["\u2581 a"]))
    doc["model"]["unk_token"] = "<unk>"
    doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}
    doc["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}
    doc.update(changes)
    return json.dumps(doc)


class Workspace:
    def __init__(self, root):
        self.root = root
        self.count = 0
        self.model = self.make_model("model")

    def path(self, name):
        return os.path.join(self.root, name)

    def write(self, name, data):
        path = self.path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path

    def make_model(self, name, config=None, weights=None, tokenizer=None):
        self.write(name + "/config.json", config if isinstance(config, str) else json.dumps(config or CONFIG))
        self.write(name + "/model.safetensors", weights if weights is not None else tiny_weights(CONFIG))
        self.write(name + "/tokenizer.json", tokenizer if tokenizer is not None else tiny_tokenizer())
        return self.path(name)

    def fresh(self, **files):
        """A copy of the valid model with some files replaced."""
        self.count += 1
        name = "m%02d" % self.count
        shutil.copytree(self.model, self.path(name))
        for file, data in files.items():
            self.write(name + "/" + file.replace("__", "."), data)
        return self.path(name)


# ---------------------------------------------------------------- the cases

def cases(w, npw):
    """(class, what was tried, argv) — argv[0] is the npw subcommand."""
    calib = w.write("calib.txt", "a bad cab " * 200)
    prune = ["prune", None, "--method", "numerical", "--ratio", "0.25", "--calib", calib, "--nsamples", "2",
             "--seqlen", "16"]

    def pruned(model, *extra):
        args = list(prune)
        args[1] = model
        return args + ["--out", w.path("out%02d" % (w.count + 100))] + list(extra)

    m = w.model
    yield ("source overwrite", "`prune --save-scores MODEL/model.safetensors`",
           pruned(w.fresh(), "--save-scores", "{model}/model.safetensors"))
    yield ("source overwrite", "`prune --save-stats MODEL/model.safetensors`",
           pruned(w.fresh(), "--save-stats", "{model}/model.safetensors"))
    yield ("source overwrite", "`prune --stats-on-disk MODEL/config.json`",
           pruned(w.fresh(), "--stats-on-disk", "{model}/config.json"))
    yield ("source overwrite", "`prune --out MODEL` (the source directory)", prune[:1] + [w.fresh()] + prune[2:] + ["--out", "{model}"])
    yield ("source overwrite", "`prune --save-scores` through a symlink to the weights",
           pruned(w.fresh(), "--save-scores", "{link}"))
    yield ("source overwrite", "`export-gguf --out MODEL/model.safetensors`", ["export-gguf", w.fresh(), "--out", "{model}/model.safetensors"])
    yield ("source overwrite", "`sweep --csv MODEL/config.json`",
           ["sweep", w.fresh(), "--methods", "magnitude", "--ratios", "0.25", "--calib", calib, "--eval", "text:" + calib,
            "--nsamples", "2", "--seqlen", "16", "--seeds", "1", "--csv", "{model}/config.json"])
    yield ("source overwrite", "`prune --save-scores MODEL/scores.safetensors` (a new file beside the weights)",
           pruned(w.fresh(), "--save-scores", "{model}/scores.safetensors"))

    deep = h.deep_json(400000)
    yield ("JSON nesting", "config.json nested 400,000 arrays deep", ["info", w.fresh(config__json='{"rope_scaling": ' + deep + "}")])
    yield ("JSON nesting", "safetensors header nested 400,000 deep",
           ["info", w.fresh(model__safetensors=h.safetensors('{"a": ' + deep + "}"))])
    yield ("JSON nesting", "tokenizer.json nested 400,000 deep",
           ["generate", w.fresh(tokenizer__json='{"model": ' + deep + "}"), "--prompt", "a b", "--tokens", "2"])
    yield ("JSON nesting", "model.safetensors.index.json nested 400,000 deep (no model.safetensors)",
           ["info", w.fresh(model__safetensors__index__json='{"weight_map": ' + deep + "}")], {"remove": "model.safetensors"})
    yield ("JSON numbers", "`1e999` in config.json", ["info", w.fresh(config__json='{"model_type": "llama", "vocab_size": 1e999}')])
    yield ("JSON numbers", "`1e999` in a safetensors header",
           ["info", w.fresh(model__safetensors=h.safetensors('{"a": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}}', b"\0" * 4))])
    yield ("JSON numbers", "`1e999` as a vocabulary id in tokenizer.json",
           ["generate", w.fresh(tokenizer__json=tiny_tokenizer().replace('"a": 4', '"a": 1e999')), "--prompt", "a", "--tokens", "2"])
    yield ("JSON types", "a 1 MB array where config.json's vocab_size belongs",
           ["info", w.fresh(config__json=json.dumps(dict(CONFIG, vocab_size=list(range(150000)))))])
    yield ("JSON syntax", "config.json cut in the middle", ["info", w.fresh(config__json=json.dumps(CONFIG)[:40])])

    yield ("sizes", "config: heads × head_dim overflows to 0 (4 × 2^62)",
           ["info", w.fresh(config__json=json.dumps(dict(CONFIG, num_attention_heads=4, num_key_value_heads=4, head_dim=1 << 62)))])
    yield ("sizes", "config: vocab_size × hidden_size overflows",
           ["info", w.fresh(config__json=json.dumps(dict(CONFIG, vocab_size=1 << 62, hidden_size=1 << 10)))])
    yield ("sizes", "config: num_hidden_layers 10^9", ["info", w.fresh(config__json=json.dumps(dict(CONFIG, num_hidden_layers=10 ** 9)))])
    yield ("sizes", "safetensors tensor declared 4 TiB",
           ["info", w.fresh(model__safetensors=h.safetensors({"a": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 4 << 40]}}))])
    yield ("sizes", "safetensors shape whose product overflows",
           ["info", w.fresh(model__safetensors=h.safetensors({"a": {"dtype": "F32", "shape": [1 << 32, 1 << 32, 0], "data_offsets": [0, 0]}}))])
    yield ("sizes", "safetensors file truncated by 100 bytes", ["info", w.fresh(model__safetensors=tiny_weights(CONFIG)[:-100])])
    yield ("GGUF", "tensors but no data section (data offset past the end)",
           ["info", w.write("g1.gguf", h.gguf([], [("w", [1 << 20], 0, 0)], pad=False))])
    yield ("GGUF", "a tensor declared 4 TiB, no data", ["info", w.write("g2.gguf", h.gguf([], [("w", [1 << 40], 0, 0)]))])
    yield ("GGUF", "a tensor whose offset lies past the data",
           ["info", w.write("g3.gguf", h.gguf([], [("w", [4], 0, 64)], struct.pack("<4f", 1, 2, 3, 4)))])
    yield ("GGUF", "a metadata key that is not UTF-8",
           ["info", w.write("g4.gguf", h.gguf([h.gguf_kv(b"general.\xff\xfe", h.GGUF_U32, struct.pack("<I", 1))])), "--json"])
    yield ("GGUF", "a string value that is not UTF-8 (`info --json`)",
           ["info", w.write("g5.gguf", h.gguf([h.gguf_kv("general.name", h.GGUF_STRING, h.gguf_string(b"\xff\xfe"))])), "--json"],
           {"show": "general.name"})
    yield ("GGUF", "10 MB file: an array of 10^7 u8 (~1 GB as parsed values)",
           ["info", w.write("g6.gguf", h.gguf([h.gguf_kv("a", h.GGUF_ARRAY, struct.pack("<iQ", h.GGUF_U8, 10 ** 7) + b"\1" * 10 ** 7)]))])
    yield ("GGUF", "an array declaring 2^60 strings",
           ["info", w.write("g7.gguf", h.gguf([h.gguf_kv("a", h.GGUF_ARRAY, struct.pack("<iQ", h.GGUF_STRING, 1 << 60))]))])
    yield ("llama2.c", "header sizes near INT32_MAX",
           ["info", w.write("l1.bin", h.llama2c_header(2147483646, 2147483647, 2147483647, 2, 2, 2147483647, 2147483647))])
    yield ("llama2.c", "vocab_size INT32_MIN", ["info", w.write("l2.bin", h.llama2c_header(64, 96, 1, 8, 4, -2147483648, 16))])
    yield ("llama2.c", "a truncated file", ["info", w.write("l3.bin", h.llama2c_header(64, 96, 1, 8, 4, 32, 16) + b"\0" * 100)])

    def nested_normalizer(depth):
        return '{"type": "Sequence", "normalizers": [' * depth + '{"type": "NFC"}' + "]}" * depth

    yield ("tokenizer", "normalizer Sequence nested 30,000 deep",
           ["generate", w.fresh(tokenizer__json=tiny_tokenizer().replace('"normalizer": null', '"normalizer": ' + nested_normalizer(30000))),
            "--prompt", "a", "--tokens", "2"])
    yield ("tokenizer", "normalizer Sequence nested 100 deep",
           ["generate", w.fresh(tokenizer__json=tiny_tokenizer().replace('"normalizer": null', '"normalizer": ' + nested_normalizer(100))),
            "--prompt", "a", "--tokens", "2"])
    yield ("tokenizer", "a vocabulary id of 2^31-1",
           ["generate", w.fresh(tokenizer__json=tiny_tokenizer().replace('"a": 4', '"a": 2147483647')), "--prompt", "a", "--tokens", "2"])
    yield ("tokenizer", "Split regex `(a+)+$`, prompt of 40 `a`s and `!`",
           ["generate", w.fresh(tokenizer__json=tiny_tokenizer(pre_tokenizer=h.split_regex("(a+)+$"))),
            "--prompt", "a" * 40 + "!", "--tokens", "2"])
    yield ("tokenizer", "Split regex `(a+)+$`, prompt of 40 `a`s (it matches)",
           ["generate", w.fresh(tokenizer__json=tiny_tokenizer(pre_tokenizer=h.split_regex("(a+)+$"))),
            "--prompt", "a" * 40, "--tokens", "2"])

    # --gpt-model: read as a LlamaGen checkpoint, so that the pickle's own error is what npw reports.
    yield ("pickle", "PyTorch checkpoint: a dict of 300,000 NaN keys", ["info", "{pt:nan_dict}", "--gpt-model", "B"])
    yield ("pickle", "PyTorch checkpoint: one 1 MiB string through `_codecs.encode` 300 times",
           ["info", "{pt:codecs}", "--gpt-model", "B"])
    yield ("pickle", "PyTorch checkpoint whose pickle calls `os.system`",
           ["info", os.path.join(ROOT, "tests/data/torch_checkpoints/hostile_payload.pt"), "--gpt-model", "B"])
    yield ("pickle", "LlamaGen checkpoint whose class table is a 0-d tensor", ["info", "{pt:class_table_0d}", "--gpt-model", "B"])

    yield ("IDX", "gzip IDX: header says 10×28×28, inflates to 1 GiB",
           ["metrics", "--images-idx", w.write("bomb.gz", h.gzip_zeros(h.idx([10, 28, 28], b"")[:16], 1 << 30)), "--limit", "4"])
    yield ("IDX", "IDX dimensions whose product overflows", ["metrics", "--images-idx", w.write("dims.idx", h.idx([0xFFFFFFFF] * 3, b""))])

    yield ("statistics", "`--stats` file whose `tokens` tensor is empty",
           ["prune", m, "--method", "numerical", "--ratio", "0.25", "--stats", "{stats:empty_tokens}", "--out", w.path("out-stats")])
    yield ("image model", "npw LlamaGen config whose `name` is a number", ["info", "{c2i:name_number}"])
    yield ("image model", "npw VQ config with 0 GroupNorm groups",
           ["generate", os.path.join(ROOT, "resources/demo/c2i"), "--class", "1", "--vq", "{vq:groups0}", "--out", w.path("img.png")])
    yield ("zero-shot", "a task line with `1e999`", ["zeroshot", m, "--task", "mc:" + w.write("task.jsonl", '{"context": "a", "choices": ["a", "b"], "gold": 1e999}\n')])
    yield ("zero-shot", "a task line nested 400,000 deep", ["zeroshot", m, "--task", "mc:" + w.write("task2.jsonl", deep + "\n")])

    yield ("flags", "`prune --alpha nan`", pruned(w.model, "--alpha", "nan"))
    yield ("flags", "`generate --temperature nan`", ["generate", m, "--prompt", "a", "--tokens", "2", "--temperature", "nan"])
    yield ("flags", "`eval --seqlen 0`", ["eval", m, "--text", calib, "--seqlen", "0"])
    yield ("flags", "`prune --nsamples 1e11`", pruned(w.model)[:8] + ["--nsamples", "1e11", "--seqlen", "16", "--out", w.path("out-n")])
    yield ("flags", "`eval --device cuda:x`", ["eval", m, "--text", calib, "--device", "cuda:x"])
    yield ("flags", "`eval --device cuda:0` (a LibTorch without CUDA, or no GPU)", ["eval", m, "--text", calib, "--device", "cuda:0"])

    # Folders npw did not write, as --out: refused whatever npw-manifest.json holds; the user's
    # files stay byte for byte (the answer says so when they did).
    def users_folder(name, manifest):
        def setup():
            w.write(name + "/thesis.tex", "\\section{Results}\n")
            w.write(name + "/npw-manifest.json", manifest)
        return setup

    def untouched(name, files):
        def after():
            for file, data in files.items():
                if open(w.path(name + "/" + file), "rb").read() != data.encode():
                    return "the user's %s CHANGED" % file
            return "the user's files untouched"
        return after

    for name, manifest, what in [
            ("f1", "my notes\n", "holds the user's files and an `npw-manifest.json` that is not JSON"),
            ("f2", '{"author": "me"}', "holds the user's files and a JSON `npw-manifest.json` that is not npw's"),
            ("f3", '{"format": "npw-pruned-model", "method": "numerical"}', "an earlier npw's export: a manifest without its file list")]:
        yield ("foreign --out", "`prune --out DIR`, DIR " + what, pruned(w.model)[:-1] + [w.path(name)],
               {"setup": users_folder(name, manifest), "after": untouched(name, {"thesis.tex": "\\section{Results}\n"})})

    def export_then(name, extra):
        def setup():
            subprocess.run([npw] + pruned(w.model)[:-1] + [w.path(name)], capture_output=True, check=True)
            if extra:
                w.write(name + "/my-notes.txt", "keep me\n")
        return setup

    yield ("foreign --out", "`prune --out DIR`, DIR an npw export with one file of the user's added",
           pruned(w.model)[:-1] + [w.path("f4")],
           {"setup": export_then("f4", True), "after": untouched("f4", {"my-notes.txt": "keep me\n"})})
    yield ("foreign --out", "`prune --out DIR`, DIR an earlier npw export (replaced)", pruned(w.model)[:-1] + [w.path("f5")],
           {"setup": export_then("f5", False)})

    # Outputs over the run's own inputs (not the model).
    evaltext = w.write("eval.txt", "a cab bad " * 100)
    sweep = ["sweep", m, "--methods", "magnitude", "--ratios", "0.25", "--calib", calib, "--eval", "text:" + evaltext,
             "--nsamples", "2", "--seqlen", "16", "--seeds", "1", "--csv"]

    def intact(path, name):
        data = open(path, "rb").read()
        return lambda: "%s intact" % name if open(path, "rb").read() == data else "%s CHANGED" % name

    def link_to(target, link, hard):
        return lambda: (os.link if hard else os.symlink)(target, w.path(link))

    yield ("output over input", "`sweep --csv` its own `--calib` text", sweep + [calib], {"after": intact(calib, "--calib")})
    yield ("output over input", "`sweep --csv` its own `--eval` text", sweep + [evaltext], {"after": intact(evaltext, "--eval")})
    yield ("output over input", "`sweep --csv` a symlink to its `--calib` text", sweep + [w.path("calib-link.csv")],
           {"setup": link_to(calib, "calib-link.csv", False), "after": intact(calib, "--calib")})
    yield ("output over input", "`sweep --csv` a hard link to its `--eval` text", sweep + [w.path("eval-hard.csv")],
           {"setup": link_to(evaltext, "eval-hard.csv", True), "after": intact(evaltext, "--eval")})

    # kill -9 mid-write, then the same command again: nothing of the killed run is left beside
    # the output. NPW_TEST_STALL stops npw at that point of the write (core/util/atomic_file.h).
    def killed(argv, point):
        def setup():
            env = dict(os.environ, NPW_TEST_STALL=point)
            p = subprocess.Popen([npw] + argv, stderr=subprocess.PIPE, env=env)
            for line in p.stderr:
                if b"stalled at" in line:
                    break
            p.kill()
            p.wait()
        return setup

    def leftovers(folder, target):
        def after():
            left = [n for n in os.listdir(folder) if n.startswith("." + target + ".npw-")]
            return "leftovers beside it: " + (", ".join(left) if left else "none")
        return after

    gguf_dir = os.path.join(w.root, "k1")
    os.makedirs(gguf_dir)
    gguf = ["export-gguf", m, "--out", os.path.join(gguf_dir, "m.gguf")]
    yield ("kill -9, rerun", "`export-gguf` killed after writing its temporary, then run again", gguf,
           {"setup": killed(gguf, "file-written"), "after": leftovers(gguf_dir, "m.gguf")})
    kill_dir = os.path.join(w.root, "k2")
    os.makedirs(kill_dir)
    again = pruned(w.model)[:-1] + [os.path.join(kill_dir, "out")]

    def export_and_kill():
        subprocess.run([npw] + again, capture_output=True, check=True)
        killed(again, "export-moved-aside")()
    yield ("kill -9, rerun", "`prune --out` over an earlier export killed between its two renames, then run again", again,
           {"setup": export_and_kill, "after": leftovers(kill_dir, "out")})

    # Silent fallbacks that would change what a run means: refused instead.
    yield ("fallback", "`generate --prompt TEXT` on a model without a tokenizer",
           ["generate", w.fresh(), "--prompt", "a b", "--tokens", "2"], {"remove": "tokenizer.json"})
    small = json.loads(h.tokenizer_json(vocab={t: i for i, t in enumerate(VOCAB[:16])}, merges=[]))
    yield ("fallback", "`eval --tokenizer` of 16 pieces on a 32-token model",
           ["eval", m, "--tokenizer", w.write("small-tokenizer.json", json.dumps(small)), "--text", calib])

    # Inputs that inflate, never end, or grow a reader's work without bound.
    line = json.dumps({"text": "a" * 1000}) + "\n"
    bomb = gzip.compress((line * ((1 << 20) // len(line))).encode(), 9)
    yield ("inflating archive", "`prune --calib c4:` a 2 MB .json.gz that inflates to 2 GiB",
           pruned(w.model)[:6] + ["--calib", "c4:" + w.write("c4/c4-train.00000-of-01024.json.gz", bomb * 2048),
                                  "--nsamples", "2", "--seqlen", "16", "--out", w.path("out-bomb")])
    yield ("inflating archive", "`eval --dataset wikitext2:` a .jsonl.gz that inflates to 4 GiB",
           ["eval", m, "--dataset", "wikitext2:" + w.write("wiki-test.jsonl.gz", bomb * 4096)])
    yield ("inflating archive", "`eval --dataset c4:` a 4 GiB bomb (evaluation reads only its first 1100 documents)",
           ["eval", m, "--dataset", "c4:" + w.write("c4/c4-validation.00000-of-00008.json.gz", bomb * 4096),
            "--seqlen", "8", "--max-windows", "2"], {"show": "dataset"})
    sparse = w.path("nul-2g.txt")
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)
    yield ("NUL text", "`eval --text` a 2 GiB file of NUL bytes (sparse)", ["eval", m, "--text", sparse])
    yield ("NUL text", "`prune --calib` the same 2 GiB file", pruned(w.model)[:6] + ["--calib", sparse, "--out", w.path("out-nul")])
    yield ("NUL text", "`eval --dataset wikitext2-test:` the same 2 GiB file",
           ["eval", m, "--dataset", "wikitext2-test:" + sparse])
    fifo_model = w.fresh(model__safetensors__index__json=json.dumps(
        {"weight_map": {name: "model-00001-of-00001.safetensors" for name in tensor_names(tiny_weights(CONFIG))}}))
    os.remove(os.path.join(fifo_model, "model.safetensors"))
    os.mkfifo(os.path.join(fifo_model, "model-00001-of-00001.safetensors"))
    yield ("FIFO", "the safetensors index names a shard that is a named pipe", ["info", fifo_model])
    fifo = w.path("pipe.txt")
    os.mkfifo(fifo)
    yield ("FIFO", "`eval --text` a named pipe", ["eval", m, "--text", fifo])
    yield ("FIFO", "`zeroshot --task mc:` a named pipe", ["zeroshot", m, "--task", "mc:" + fifo])
    tiktoken = open(os.path.join(ROOT, "tests/data/tokenizers/llama3/tokenizer.model")).read()
    cut = tiktoken.index("\n", 1000) + 1
    yield ("tiktoken", "LLaMA-3 tokenizer.model with one token of 300 KB",
           ["tokenize", w.write("tt/tokenizer.model", tiktoken[:cut] + "YWFh" * 100000 + " 127999\n" + tiktoken[cut:]),
            "--string", "hello"])
    many = json.dumps({"context": "Pick:", "choices": ["c%d" % i for i in range(100000)], "gold": 0})
    yield ("zero-shot", "an item with 100,000 choices", ["zeroshot", m, "--task", "mc:" + w.write("many.jsonl", many + "\n")])
    yield ("zero-shot", "a choice that is the empty string",
           ["zeroshot", m, "--task", "mc:" + w.write("empty.jsonl", json.dumps({"context": "The sky is", "choices": ["blue", ""],
                                                                              "gold": 1}) + "\n")])
    yield ("dtype", "llama2.c `ckpt.pt` whose weights are int32 storages",
           ["eval", os.path.join(ROOT, "tests/data/torch_checkpoints/llama2c_int32_weights.pt"),
            "--ids", w.write("ids.txt", " ".join(str(i) for i in range(1, 40))), "--seqlen", "8"])
    meta = w.path("meta-mixed")
    os.makedirs(meta)
    for source, name in (("meta_llama2_2shards", "params.json"), ("meta_llama2_2shards", "consolidated.00.pth"),
                         ("meta_llama31_2shards", "consolidated.01.pth")):
        shutil.copy(os.path.join(ROOT, "tests/data/family_ref", source, name), os.path.join(meta, name))
    yield ("Meta shards", "`consolidated.01.pth` of another model of the family (LLaMA-3.1's beside LLaMA-2's)", ["info", meta])
    yield ("denormal", "config.json `rope_scaling` factor 1e-320",
           ["eval", w.fresh(config__json=json.dumps(dict(CONFIG, rope_scaling={"rope_type": "linear", "factor": 1e-320}))),
            "--text", calib])
    yield ("denormal", "config.json `rms_norm_eps` 1e-320", ["eval", w.fresh(config__json=json.dumps(dict(CONFIG, rms_norm_eps=1e-320))),
                                                             "--text", calib])
    for source, name in (("tok105.bin", "tokenizer.bin"), ("tok105.model", "tokenizer.model")):
        whole = open(os.path.join(ROOT, "tests/data/sentencepiece", source), "rb").read()
        yield ("tokenize", "`npw tokenize` a damaged `%s` (its first half)" % name,
               ["tokenize", w.write("damaged-" + source + "/" + name, whole[:len(whole) // 2]), "--string", "hello"])

    huge = w.fresh(model__safetensors=tiny_weights(CONFIG, huge={"model.layers.1.mlp.up_proj.weight"}))
    text = w.write("text.txt", "a bad cab " * 200)
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `eval`", ["eval", huge, "--text", text, "--seqlen", "16", "--json"])
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `eval --layerwise`",
           ["eval", huge, "--text", text, "--seqlen", "16", "--layerwise", "--json"])
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `generate --json`",
           ["generate", huge, "--prompt", "a b", "--tokens", "4", "--json"])
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `compare` against the valid model",
           ["compare", m, huge, "--prompt", "a b", "--tokens", "4", "--json"])
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `prune`", pruned(huge, "--json"))
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `zeroshot`",
           ["zeroshot", huge, "--task", "mc:" + w.write("task3.jsonl", '{"context": "a b", "choices": [" cab", " bad"], "gold": 0}\n'),
            "--json"])
    yield ("huge finite weights", "layer 1's up_proj ±3e38: `sweep`",
           ["sweep", huge, "--methods", "magnitude", "--ratios", "0.25", "--calib", calib, "--eval", "text:" + text,
            "--nsamples", "2", "--seqlen", "16", "--seeds", "1", "--json"])
    labelled = w.fresh()
    w.write(os.path.relpath(os.path.join(labelled, "npw-manifest.json"), w.root), deep)
    yield ("export manifest", "a pruned model's npw-manifest.json nested 400,000 deep (`compare` labels the model by it)",
           ["compare", m, labelled, "--prompt", "a b", "--tokens", "2"])

    # More silent fallbacks, refused: a prompt or task text with no tokenizer to encode it, and a
    # tokenizer that covers too little of the model's vocabulary unless the user says so.
    untokenized = w.fresh()
    os.remove(os.path.join(untokenized, "tokenizer.json"))
    yield ("fallback", "`compare --prompt TEXT` on models without a tokenizer",
           ["compare", untokenized, untokenized, "--prompt", "a b", "--tokens", "2"])
    yield ("fallback", "`zeroshot --task` (text choices) on a model without a tokenizer",
           ["zeroshot", untokenized, "--task", "mc:" + w.write("task4.jsonl", '{"context": "a b", "choices": [" cab", " bad"], "gold": 0}\n')])
    yield ("fallback", "`eval --tokenizer` of 16 pieces on a 32-token model with `--allow-small-vocab`",
           ["eval", m, "--tokenizer", w.path("small-tokenizer.json"), "--text", calib, "--allow-small-vocab"], {"show": "ppl"})

    # The layer-by-layer sweep refuses what it cannot run before any work.
    layerwise = ["sweep", m, "--layerwise", "--ratios", "0.25", "--calib", calib, "--eval", "text:" + evaltext,
                 "--nsamples", "2", "--seqlen", "16", "--seeds", "1", "--methods"]
    yield ("layer-wise sweep", "`sweep --layerwise --methods llm-pruner` (a baseline)", layerwise + ["llm-pruner"])
    yield ("layer-wise sweep", "`sweep --layerwise --methods numerical-lstar-kl`", layerwise + ["numerical-lstar-kl"])
    yield ("layer-wise sweep", "`sweep --layerwise --speed`", layerwise + ["magnitude", "--speed"])
    yield ("layer-wise sweep", "`sweep --layerwise --zeroshot`", layerwise + ["magnitude", "--zeroshot", "mc:" + w.path("task4.jsonl")])

    # `npw bench --suite projection --from REPORT`: a report whose measured rates cannot project.
    report = w.path("prune-report.json")

    def prune_report(name, rate):
        def setup():
            if not os.path.exists(report):
                done = subprocess.run([npw] + prune[:1] + [w.model] + prune[2:] + ["--out", w.path("out-report"), "--json"],
                                      capture_output=True, check=True, env=dict(os.environ, NPW_NUM_THREADS="1"))
                w.write("prune-report.json", done.stdout)
            if name:
                doc = json.load(open(report))
                doc["stage_bounds"]["rates"]["float64_gemm_flop_per_s"] = rate
                w.write(name, json.dumps(doc))
        return setup

    projection = ["bench", "--suite", "projection", "--from"]
    yield ("projection", "`bench --suite projection` of a report whose float64 GEMM rate is 0 (not measured)",
           projection + [w.path("rate-zero.json")], {"setup": prune_report("rate-zero.json", 0)})
    yield ("projection", "`bench --suite projection` of a report with a negative rate",
           projection + [w.path("rate-negative.json")], {"setup": prune_report("rate-negative.json", -1e9)})
    yield ("projection", "`bench --suite projection --shapes ,` (no shape)", projection + [report, "--shapes", ","],
           {"setup": prune_report(None, None)})
    yield ("projection", "`bench --suite projection --calibrations ,` (no calibration)",
           projection + [report, "--calibrations", ","], {"setup": prune_report(None, None)})


def tensor_names(safetensors):
    """The tensor names of a safetensors file's header."""
    length = struct.unpack("<Q", safetensors[:8])[0]
    return [k for k in json.loads(safetensors[8:8 + length]) if k != "__metadata__"]


def make_special(w, key):
    """Inputs that need PyTorch or copies of bundled models, made on demand."""
    kind, name = key.split(":", 1)
    if kind == "pt":
        import torch  # Debian's python3-torch
        path = w.path(name + ".pt")
        if name == "nan_dict":  # each float("nan") is its own object, so its own key
            torch.save({float("nan"): i for i in range(300000)}, path)
        elif name == "codecs":  # protocol 2 pickles bytes as _codecs.encode(str, 'latin1'), repeated through the memo
            w.write(name + ".pt", zip_pickle(h.pickle_codecs_bomb(1 << 20, 300)))
        elif name == "class_table_0d":
            torch.save({"model": {"cls_embedding.embedding_table.weight": torch.tensor(1.0),
                                  "tok_embeddings.weight": torch.zeros(16, 8)}}, path)
        return path
    if kind == "stats":
        header = {"layers.0.attn.gram": {"dtype": "F64", "shape": [8, 8], "data_offsets": [0, 512]},
                  "layers.0.attn.sum": {"dtype": "F64", "shape": [8], "data_offsets": [512, 576]},
                  "layers.0.attn.sum_sq": {"dtype": "F64", "shape": [8], "data_offsets": [576, 640]},
                  "layers.0.attn.tokens": {"dtype": "I64", "shape": [0], "data_offsets": [640, 640]}}
        return w.write("stats.safetensors", h.safetensors(header, b"\0" * 640))
    if kind == "c2i":
        path = w.path("c2i-" + name)
        shutil.copytree(os.path.join(ROOT, "resources/demo/c2i"), path)
        config = json.load(open(os.path.join(path, "config.json")))
        config["name"] = 5
        w.write("c2i-" + name + "/config.json", json.dumps(config))
        return path
    if kind == "vq":
        path = w.path("vq-" + name)
        shutil.copytree(os.path.join(ROOT, "resources/demo/c2i/vq"), path)
        config = json.load(open(os.path.join(path, "config.json")))
        config["norm_groups"] = 0
        w.write("vq-" + name + "/config.json", json.dumps(config))
        return path
    raise ValueError(key)


def zip_pickle(pickle):
    """A PyTorch-style zip (archive/data.pkl, STORED) around a pickle."""
    import io
    import zipfile
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle)
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npw", default=os.path.join(ROOT, "build", "app", "npw"))
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--rows", help="only these rows, e.g. 4,6,54-64 (their numbers stay those of the full table)")
    parser.add_argument("--from", dest="first", type=int, default=1,
                        help="run only the cases from this number on (the table's rows keep their numbers)")
    args = parser.parse_args()
    npw = os.path.abspath(args.npw)
    if not os.path.exists(npw):
        sys.exit("no npw at %s: build it first (cmake --build build --target npw)" % npw)
    root = tempfile.mkdtemp(prefix="npw-bad-inputs-")
    env = dict(os.environ, NPW_NUM_THREADS="1", QT_QPA_PLATFORM="offscreen")
    rows = []
    try:
        w = Workspace(root)
        wanted = None
        if args.rows:
            wanted = set()
            for part in args.rows.split(","):
                lo, _, hi = part.partition("-")
                wanted.update(range(int(lo), int(hi or lo) + 1))
        for number, case in enumerate(cases(w, npw), 1):
            if (wanted is not None and number not in wanted) or number < args.first:
                continue
            klass, what, argv = case[0], case[1], list(case[2])
            model = argv[1] if len(argv) > 1 else ""
            options = case[3] if len(case) > 3 else {}
            if "remove" in options:
                os.remove(os.path.join(model, options["remove"]))
            if "setup" in options:
                options["setup"]()
            link = os.path.join(root, "link%02d.safetensors" % number)
            if "{link}" in argv:
                os.symlink(os.path.join(model, "model.safetensors"), link)
            resolved = []
            for a in argv:
                if a.startswith("{") and a.endswith("}") and ":" in a:
                    a = make_special(w, a[1:-1])
                resolved.append(a.replace("{model}", model).replace("{link}", link))
            start = time.monotonic()
            try:
                done = subprocess.run([npw] + resolved, capture_output=True, timeout=args.timeout, env=env, cwd=root)
                code, out, err = done.returncode, done.stdout, done.stderr
            except subprocess.TimeoutExpired:
                code, out, err = "timeout", b"", b"(killed after %d s)" % args.timeout
            seconds = time.monotonic() - start
            text = (err if err.strip() else out).decode("utf-8", "replace").strip().splitlines()
            if "show" in options:  # the line that says what was accepted
                text = [line.strip() for line in text if options["show"] in line] or text
            elif code != 0:  # the refusal itself, not a warning printed before it
                text = [line for line in text if ": error: " in line] or text
            first = text[0] if text else ""
            if "after" in options:  # what the run left (the user's files, temporaries)
                first += " — " + options["after"]()
            first = first.replace(root + "/", "").replace(ROOT + "/", "").replace("|", "\\|")
            if len(first) > 220:
                first = first[:220] + "…"
            rows.append((number, klass, what, code, seconds, first))
            print("%2d %-18s exit %-4s %6.1f s  %s" % (number, klass, code, seconds, first[:100]), file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("| # | class | input | exit | s | npw's answer (first line) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for number, klass, what, code, seconds, first in rows:
        print("| %d | %s | %s | %s | %.1f | %s |" % (number, klass, what, code, seconds, first))
    bad = [r for r in rows if r[3] not in (0, 1)]
    print("\n%d inputs: %d refused with exit 1, %d accepted (exit 0), %d other." %
          (len(rows), sum(1 for r in rows if r[3] == 1), sum(1 for r in rows if r[3] == 0), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
