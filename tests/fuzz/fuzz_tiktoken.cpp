// libFuzzer harness: LLaMA-3's tiktoken tokenizer.model (tiktokenAsTokenizerJson).
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("tiktoken")
