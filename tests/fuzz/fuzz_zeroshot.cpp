// libFuzzer harness: zero-shot task files (loadZeroShotTask, every task kind).
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("zeroshot")
