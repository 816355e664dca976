// libFuzzer harness for npw's own tokenizer-file readers (issue 14): SentencePiece
// tokenizer.model (protobuf, charsmap) and llama2.c tokenizer.bin. Not built by CMake (the
// suites are tests/tst_*.cpp); build only the parser sources, with Debian's clang:
//
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
//     -o fuzz_tokenizer_files tests/fuzz/fuzz_tokenizer_files.cpp core/text/protobuf_reader.cpp \
//     core/text/sentencepiece_model.cpp core/text/sentencepiece_normalizer.cpp \
//     core/text/sentencepiece_tokenizer.cpp core/text/llama2c_tokenizer.cpp core/text/utf8.cpp
//   mkdir corpus; for f in tests/data/sentencepiece/*.model; do (printf '\x01'; cat $f) > corpus/$(basename $f); done
//   for f in tests/data/sentencepiece/*.bin; do (printf '\x02'; cat $f) > corpus/$(basename $f); done
//   ./fuzz_tokenizer_files -max_total_time=600 corpus
//
// The first input byte picks the reader (bit 0: SentencePiece, else tokenizer.bin; bit 1: read
// a .bin to its end, else exactly 1000 tokens); the rest is the file. What loads encodes and
// decodes a mixed text. Anything but npw::Error escaping, a sanitizer report or a hang is a bug.
// (First run, 240 s: 217,715 inputs, no finding.)
#include "core/text/sentencepiece_tokenizer.h"
#include "core/text/llama2c_tokenizer.h"
#include "core/util/error.h"
#include <cstdint>
#include <string>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    const std::string text = "Hello  w\xc3\xb6rld 12 \xef\xbc\xa1 \xe6\x9d\xb1\xff \xf0\x9f\x98\x80\t\n x";
    try {
        if (data[0] & 1) {
            auto t = npw::SentencePieceTokenizer::fromBytes(bytes, "fuzz.model");
            auto ids = t->encode(text, true);
            t->decode(ids);
            std::vector<int32_t> all;
            for (int32_t i = 0; i < t->vocabSize() && i < 300; ++i) all.push_back(i);
            t->decode(all);
        } else {
            auto t = npw::Llama2cTokenizer::fromBytes(bytes, "fuzz.bin", (data[0] & 2) ? -1 : 1000);
            auto ids = t->encode(text, true);
            t->decode(ids);
        }
    } catch (const npw::Error&) {
    }
    return 0;
}
