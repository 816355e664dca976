// libFuzzer harness: config files: HF LLaMA config.json, classifier, LlamaGen and VQ configs, the safetensors index (first byte picks).
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("config_json")
