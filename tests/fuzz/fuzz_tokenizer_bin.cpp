// libFuzzer harness: llama2.c tokenizer.bin (Llama2cTokenizer) encoded and decoded, the decoded text written as JSON.
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("tokenizer_bin")
