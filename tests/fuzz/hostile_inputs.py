"""Builders of hostile inputs for npw's readers (issue 16), shared by
tests/fuzz/make_regressions.py (the regression corpus the CTest suite replays) and
packaging/bad-inputs.py (the README's bad-input table, through the CLI).

Plain Python 3 (struct, json, gzip, zlib): no third-party package is needed.
"""

import gzip
import json
import struct
import zlib

# ---------------------------------------------------------------- JSON


def deep_json(depth, leaf="0"):
    """A JSON array nested `depth` levels deep."""
    return "[" * depth + leaf + "]" * depth


# ---------------------------------------------------------------- safetensors


def safetensors(header, data=b"", pad=True):
    """A safetensors file from a header (dict, or JSON text as str) and its data bytes."""
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode("utf-8")
    if pad:
        raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def f32_tensor_file(name="w", values=(1.0, 2.0, 3.0, 4.0), shape=None, metadata=None):
    data = struct.pack("<%df" % len(values), *values)
    header = {name: {"dtype": "F32", "shape": list(shape or [len(values)]), "data_offsets": [0, len(data)]}}
    if metadata:
        header["__metadata__"] = metadata
    return safetensors(header, data)


# ---------------------------------------------------------------- GGUF

GGUF_U8, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_U64 = 0, 4, 5, 6, 7, 8, 9, 10


def gguf_string(text):
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def gguf_kv(key, vtype, payload):
    return gguf_string(key) + struct.pack("<i", vtype) + payload


def gguf(kvs=(), tensors=(), data=b"", alignment=32, pad=True, version=3):
    """A GGUF file. kvs: encoded key/values (gguf_kv); tensors: (name, ne list, ggml type, offset)."""
    out = b"GGUF" + struct.pack("<Iqq", version, len(tensors), len(kvs))
    for kv in kvs:
        out += kv
    for name, ne, ggml_type, offset in tensors:
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        out += struct.pack("<iQ", ggml_type, offset)
    if pad:
        out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    return out + data


def gguf_valid():
    """A small valid GGUF: a name, an array, one 4×2 F32 tensor."""
    kvs = [gguf_kv("general.architecture", GGUF_STRING, gguf_string("llama")),
           gguf_kv("general.name", GGUF_STRING, gguf_string("tiny")),
           gguf_kv("tokenizer.ggml.scores", GGUF_ARRAY, struct.pack("<iQ", GGUF_F32, 3) + struct.pack("<3f", 0, -1, -2))]
    return gguf(kvs, [("w", [4, 2], 0, 0)], struct.pack("<8f", *range(8)))


# ---------------------------------------------------------------- pickles (protocol 2)

PROTO2 = b"\x80\x02"


def pickle_nan_dict(count):
    """{nan: 0, nan: 1, ...}: `count` distinct NaN objects as keys (each is its own key in Python)."""
    nan = struct.pack(">d", float("nan"))
    body = b"}(" + b"".join(b"G" + nan + b"K" + bytes([i % 256]) for i in range(count)) + b"u."
    return PROTO2 + body


def pickle_colliding_keys(count):
    """A dict of `count` distinct int keys that share the low bits of their hashes."""
    body = b"}("
    for i in range(count):
        body += b"J" + struct.pack("<i", i << 16) + b"N"
    return PROTO2 + body + b"u."


def pickle_codecs_bomb(string_bytes, repeats):
    """A list of `repeats` results of _codecs.encode(s, 'latin1') on one memoized str s."""
    s = b"a" * string_bytes
    out = PROTO2 + b"](" + b"c_codecs\nencode\nq\x00" + b"X" + struct.pack("<I", len(s)) + s + b"q\x01"
    out += b"X" + struct.pack("<I", 6) + b"latin1" + b"q\x02" + b"\x86R"
    out += b"h\x00h\x01h\x02\x86R" * (repeats - 1)
    return out + b"e."


def pickle_deep_tuple_keys(depth):
    """A dict whose key is a tuple nested `depth` deep (the unpickler bounds tuple nesting)."""
    return PROTO2 + b"}K\x01" + b"\x85" * depth + b"K\x00s."


# ---------------------------------------------------------------- llama2.c

def llama2c_header(dim, hidden, layers, heads, kv_heads, vocab, seq_len):
    return struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len)


# ---------------------------------------------------------------- IDX

def idx(shape, data, dtype=0x08):
    return bytes([0, 0, dtype, len(shape)]) + b"".join(struct.pack(">I", d) for d in shape) + data


def gzip_bytes(raw, level=9):
    return gzip.compress(raw, compresslevel=level, mtime=0)


def gzip_zeros(prefix, zero_bytes, level=9):
    """prefix followed by `zero_bytes` zeros, gzip-compressed in chunks (never held whole)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = [compressor.compress(prefix)]
    chunk = b"\0" * (1 << 20)
    left = zero_bytes
    while left > 0:
        n = min(left, len(chunk))
        out.append(compressor.compress(chunk[:n]))
        left -= n
    out.append(compressor.flush())
    return b"".join(out)


# ---------------------------------------------------------------- tokenizer.json

def tokenizer_json(vocab=None, merges=None, normalizer=None, pre_tokenizer=None, decoder=None, added_tokens=None):
    vocab = vocab if vocab is not None else {"a": 0, "b": 1, "ab": 2, "<s>": 3, "</s>": 4}
    doc = {
        "version": "1.0",
        "added_tokens": added_tokens or [],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": decoder,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges if merges is not None else ["a b"]},
    }
    return json.dumps(doc)


def nested_sequence(kind, list_key, depth, leaf):
    node = leaf
    for _ in range(depth):
        node = {"type": "Sequence", list_key: [node]}
    return node


def split_regex(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


# ---------------------------------------------------------------- config.json

def llama_config(**overrides):
    config = {"model_type": "llama", "vocab_size": 16, "hidden_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 12}
    config.update(overrides)
    return config
