// libFuzzer harness: the papers' data sets (readTextDataset: wikitext2, ptb, ptb-flap, c4; raw text, JSON lines, gzip).
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("text_dataset")
