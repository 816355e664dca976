// libFuzzer harness: PyTorch zip checkpoints and raw pickles (TorchCheckpoint::open, unpickle); first byte 'P': a raw pickle.
// The contract it checks and the corpus it starts from: tests/fuzz/fuzz_targets.h, packaging/fuzz.sh.
#include "tests/fuzz/fuzz_harness.h"

NPW_FUZZ_HARNESS("torch_checkpoint")
