#!/usr/bin/python3
"""Writes the inputs of issue 16's campaign into tests/fuzz/regressions/<target>/, where
tests/tst_fuzz_regressions.cpp replays them on every build. Inputs the fuzzers find later are
copied there by hand (packaging/fuzz.sh prints where libFuzzer left them), never regenerated.

    /usr/bin/python3 tests/fuzz/make_regressions.py     # deterministic, a few seconds

Each file's first line in README.md says what it is and what npw must answer.
"""

import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_inputs as h  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions")

CASES = []  # (target, file name, bytes, what npw must do)


def case(target, name, data, what):
    CASES.append((target, name, data if isinstance(data, bytes) else data.encode("utf-8"), what))


# ---- safetensors
case("safetensors", "deep_nesting", h.safetensors('{"a": ' + h.deep_json(100000) + "}"),
     "a header value nested 100,000 arrays deep: refused while parsing (was a stack overflow in dump())")
case("safetensors", "number_overflow", h.safetensors('{"a": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}}', b"\0" * 4),
     "1e999 in the header: npw::Error naming the file (was the JSON library's out_of_range 406, exit 3)")
case("safetensors", "huge_value_in_message",
     h.safetensors(json.dumps({"a": {"dtype": list(range(20000)), "shape": [1], "data_offsets": [0, 4]}}), b"\0" * 4),
     "a 1 MB value where a dtype belongs: the message shows a bounded prefix")
case("safetensors", "tensor_4tib", h.safetensors({"a": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 4 << 40]}}),
     "a tensor declared 4 TiB long in a tiny file: refused (it ends past the file)")
case("safetensors", "shape_overflow", h.safetensors({"a": {"dtype": "F32", "shape": [1 << 32, 1 << 32, 0], "data_offsets": [0, 0]}}),
     "dimensions whose product overflows 64 bits before a 0: refused")
case("safetensors", "valid", h.f32_tensor_file(), "a valid file: accepted")

# ---- GGUF
case("gguf", "valid", h.gguf_valid(), "a valid file: accepted")
case("gguf", "data_offset_past_end",
     h.gguf([], [("w", [1 << 20], 0, 0)], pad=False),
     "a tensor and no data section (the padded data offset lies past the end): refused (was size - dataOffset wrapping)")
case("gguf", "tensor_4tib", h.gguf([], [("w", [1 << 40], 0, 0)]),
     "a tensor declared 4 TiB long with no data: refused")
case("gguf", "tensor_outside", h.gguf([], [("w", [4], 0, 64)], struct.pack("<4f", 1, 2, 3, 4)),
     "a tensor whose offset puts it past the end of the data: refused")
case("gguf", "offset_wraps", h.gguf([], [("w", [4], 0, (1 << 64) - 32)], struct.pack("<4f", 1, 2, 3, 4)),
     "an offset that wraps around 2^64 when added: refused")
case("gguf", "key_not_utf8", h.gguf([h.gguf_kv(b"general.\xff\xfe", h.GGUF_U32, struct.pack("<I", 1))]),
     "a metadata key that is not UTF-8: refused (was accepted, and `npw info --json` failed)")
case("gguf", "value_not_utf8", h.gguf([h.gguf_kv("general.name", h.GGUF_STRING, h.gguf_string(b"\xff\xfe\xc3"))]),
     "a string value that is not UTF-8: accepted, printed with U+FFFD")
case("gguf", "u8_array_1m", h.gguf([h.gguf_kv("a", h.GGUF_ARRAY, struct.pack("<iQ", h.GGUF_U8, 1 << 20) + b"\1" * (1 << 20))]),
     "a 1 MiB array of u8 (~100 MB as parsed values): refused by the metadata memory budget")
case("gguf", "array_count_lies", h.gguf([h.gguf_kv("a", h.GGUF_ARRAY, struct.pack("<iQ", h.GGUF_STRING, 1 << 60))]),
     "an array declaring 2^60 strings in a tiny file: refused before anything is reserved")

# ---- PyTorch zip + raw pickles (first byte 'P')
case("torch_checkpoint", "nan_dict_100k", b"P" + h.pickle_nan_dict(100000),
     "a dict of 100,000 NaN keys: unpickled in linear time (was quadratic: minutes for 300,000)")
case("torch_checkpoint", "int_keys", b"P" + h.pickle_colliding_keys(30000),
     "30,000 int keys sharing their low hash bits: linear time")
case("torch_checkpoint", "codecs_bomb", b"P" + h.pickle_codecs_bomb(64 * 1024, 5000),
     "one 64 KiB string encoded with _codecs.encode 5,000 times (320 MB): refused by the total bound")
case("torch_checkpoint", "deep_tuple_key", b"P" + h.pickle_deep_tuple_keys(100000),
     "a dict key nested 100,000 tuples deep: refused by the nesting limit")
case("torch_checkpoint", "not_a_zip", b"PK\x03\x04" + b"\0" * 60, "a truncated zip: refused")

# ---- tokenizer.json
case("tokenizer_json", "deep_nesting", '{"model": ' + h.deep_json(100000) + "}",
     "tokenizer.json nested 100,000 arrays deep: refused while parsing")
case("tokenizer_json", "number_overflow", h.tokenizer_json().replace('"ab": 2', '"ab": 1e999'),
     "1e999 as a vocabulary id: npw::Error naming the file")
case("tokenizer_json", "normalizer_sequence_10000",
     h.tokenizer_json().replace('"normalizer": null', '"normalizer": ' + '{"type": "Sequence", "normalizers": [' * 10000 +
                                '{"type": "NFC"}' + "]}" * 10000),
     "a normalizer Sequence nested 10,000 deep (the issue: 30,000): refused while parsing (was 2.4 GB, then std::bad_alloc)")
case("tokenizer_json", "normalizer_sequence_100",
     h.tokenizer_json(normalizer=h.nested_sequence("normalizer", "normalizers", 100, {"type": "NFC"})),
     "a normalizer Sequence nested 100 deep (within the JSON depth): refused by the Sequence limit")
case("tokenizer_json", "pre_tokenizer_sequence_100",
     h.tokenizer_json(pre_tokenizer=h.nested_sequence("pre", "pretokenizers", 100, {"type": "Metaspace"})),
     "a pre-tokenizer Sequence nested 100 deep: refused")
case("tokenizer_json", "decoder_sequence_100",
     h.tokenizer_json(decoder=h.nested_sequence("dec", "decoders", 100, {"type": "Fuse"})),
     "a decoder Sequence nested 100 deep: refused")
case("tokenizer_json", "vocab_id_2p31", h.tokenizer_json(vocab={"a": 0, "b": 1, "ab": 2147483647}),
     "a vocabulary id of 2^31-1 among 3 tokens: refused (was a 64 GB id table, std::bad_alloc)")
case("tokenizer_json", "added_token_id_2p31",
     h.tokenizer_json(added_tokens=[{"id": 2147483647, "content": "<x>", "special": True}]),
     "an added token id of 2^31-1: refused")
case("tokenizer_json", "regex_catastrophic", h.tokenizer_json(pre_tokenizer=h.split_regex("(a+)+$")),
     "a Split regex (a+)+$ run over 40 'a's and a '!': a clear error within ~1 s (was a hang)")
case("tokenizer_json", "regex_invalid", h.tokenizer_json(pre_tokenizer=h.split_regex("(" * 1000)),
     "an unbalanced regex: refused naming the field")
case("tokenizer_json", "valid", h.tokenizer_json(), "a valid file: accepted")

# ---- config files (first byte: 0 LLaMA config.json, 1 classifier, 2 LlamaGen, 3 VQ, 4 index)
case("config_json", "heads_overflow", b"\x00" + json.dumps(h.llama_config(num_attention_heads=4, num_key_value_heads=4,
                                                                         head_dim=(1 << 62))).encode(),
     "heads × head_dim overflows 64 bits: refused (was accepted and died in LibTorch)")
case("config_json", "vocab_overflow", b"\x00" + json.dumps(h.llama_config(vocab_size=1 << 62, hidden_size=1 << 10)).encode(),
     "vocab_size × hidden_size overflows: refused")
case("config_json", "number_overflow", b"\x00" + b'{"model_type": "llama", "vocab_size": 1e999}',
     "1e999 in config.json: npw::Error naming the file (was exit 3)")
case("config_json", "deep_nesting", b"\x00" + ('{"rope_scaling": ' + h.deep_json(100000) + "}").encode(),
     "config.json nested 100,000 deep: refused while parsing (was a crash in dump())")
case("config_json", "valid", b"\x00" + json.dumps(h.llama_config()).encode(), "a valid config: accepted")
case("config_json", "classifier_architecture_number", b"\x01" + b'{"architecture": 7}',
     "a classifier config whose architecture is a number: npw::Error")
case("config_json", "llamagen_name_number", b"\x02" + json.dumps({
    "model_type": "llamagen-c2i", "name": 5, "dim": 64, "n_layer": 2, "grid_size": 4, "vocab_size": 16, "num_classes": 10,
    "downsample_size": 16, "head_dim": 16, "n_head": 4, "ffn_hidden": 128}).encode(),
     "an npw image-model config whose name is a number: npw::Error naming the field (was exit 3)")
case("config_json", "llamagen_layers_huge", b"\x02" + json.dumps({
    "model_type": "llamagen-c2i", "dim": 64, "n_layer": 1 << 40, "grid_size": 4, "vocab_size": 16, "num_classes": 10,
    "downsample_size": 16, "head_dim": 16, "n_head": 4, "ffn_hidden": 128}).encode(),
     "an npw image-model config with 2^40 layers: refused before per-layer lists are sized")
case("config_json", "vq_groups_zero", b"\x03" + b'{"model_type": "llamagen-vq", "norm_groups": 0}',
     "a VQ config with 0 GroupNorm groups: refused (a division by zero otherwise)")
case("config_json", "index_deep", b"\x04" + ('{"weight_map": ' + h.deep_json(100000) + "}").encode(),
     "a safetensors index nested 100,000 deep: refused while parsing")
case("config_json", "index_number_overflow", b"\x04" + b'{"weight_map": {"a": 1e999}}',
     "1e999 in a safetensors index: npw::Error")

# ---- llama2.c
case("llama2c", "dims_near_int32_max", h.llama2c_header(2147483646, 2147483647, 2147483647, 2, 2, 2147483647, 2147483647),
     "header sizes near INT32_MAX: refused (their products overflow or exceed the file)")
case("llama2c", "negative_vocab_min", h.llama2c_header(64, 96, 1, 8, 4, -2147483648, 16),
     "vocab_size INT32_MIN (untied, negated): refused")
case("llama2c", "truncated", h.llama2c_header(64, 96, 1, 8, 4, 32, 16) + b"\0" * 100, "a truncated file: refused")

# ---- IDX
case("idx", "gzip_bomb", h.gzip_zeros(bytes([0, 0, 8, 1]) + struct.pack(">I", 4), 256 << 20),
     "a gzip IDX that says 4 bytes and inflates to 256 MiB: refused after 5 bytes (was inflated whole: 1 GiB, bad_alloc)")
case("idx", "dims_overflow", h.idx([0xFFFFFFFF] * 4, b""), "dimensions whose product overflows: refused")
case("idx", "gzip_declares_4g", h.gzip_bytes(h.idx([1 << 16, 1 << 16], b"\0" * 16)),
     "a gzip IDX declaring 4 GiB with 16 bytes of data: refused (truncated) without inflating more than there is")
case("idx", "valid", h.gzip_bytes(h.idx([2, 2, 2], bytes(range(8)))), "a valid gzip file: accepted")

# ---- tokenizer.model / tokenizer.bin (first byte: bit 0 SentencePiece, else llama2.c; bit 1 read to the end)
case("tokenizer_files", "bin_huge_length", b"\x02" + struct.pack("<i", 16) + struct.pack("<fi", 0.0, 2147483647) + b"ab",
     "a tokenizer.bin piece declaring 2^31-1 bytes: refused")
case("tokenizer_files", "model_truncated", b"\x01" + b"\x0a\xff\xff\xff\xff\x0f", "a truncated protobuf: refused")


def main():
    readme = ["# Regression inputs (issue 16)", "",
              "Replayed by `tests/tst_fuzz_regressions.cpp` through `tests/fuzz/fuzz_targets.h` on every build.",
              "Written by `tests/fuzz/make_regressions.py` (the campaign's inputs); inputs the fuzzers found",
              "are added by hand with a line here.", "", "| target | file | bytes | npw must |", "| --- | --- | --- | --- |"]
    for target, name, data, what in CASES:
        folder = os.path.join(ROOT, target)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        readme.append("| %s | %s | %d | %s |" % (target, name, len(data), what))
    found = os.path.join(ROOT, "found.md")
    if os.path.exists(found):
        with open(found) as f:
            readme += ["", f.read().rstrip()]
    with open(os.path.join(ROOT, "README.md"), "w") as f:
        f.write("\n".join(readme) + "\n")
    print("wrote %d inputs under %s" % (len(CASES), ROOT))


if __name__ == "__main__":
    main()
