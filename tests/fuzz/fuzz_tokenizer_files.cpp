// libFuzzer harness for npw's own tokenizer-file readers (issue 14): SentencePiece
// tokenizer.model (protobuf, charsmap) and llama2.c tokenizer.bin. The first input byte picks
// the reader (bit 0: SentencePiece, else tokenizer.bin; bit 1: read a .bin to its end, else
// exactly 1000 tokens); the rest is the file. What loads encodes and decodes a mixed text.
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
// (First run, before CMake built it, 240 s: 217,715 inputs, no finding.)
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("tokenizer_files")
