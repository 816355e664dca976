#pragma once
// npw's fuzz targets: each feeds one input to one of npw's readers and checks npw's contract
// on it. The contract: a reader either accepts the input or refuses it with npw::Error (no
// other exception, no crash, no hang, no allocation beyond its caps), and whatever it accepts
// is internally consistent (every tensor inside the file, sizes that multiply without
// overflow, views inside their storages, ids inside the vocabulary).
//
// The same code runs in two places: the libFuzzer harnesses (tests/fuzz/fuzz_<format>.cpp,
// built with clang and -fsanitize=fuzzer,address,undefined when NPW_FUZZ=ON) and the ordinary
// CTest suite tests/tst_fuzz_regressions.cpp, which replays tests/fuzz/regressions/<target>/
// (every input that ever broke the contract) on every build.
#include <string>
#include <string_view>
#include <vector>

namespace npw::fuzz {

struct Target {
    const char* name;  // also the folder of its regression inputs and seeds
    void (*run)(std::string_view bytes);
};

// safetensors, gguf, torch_checkpoint (zip + pickle; first byte 'P' = a raw pickle),
// tokenizer_json, config_json (first byte picks the config kind), llama2c, idx,
// tokenizer_files (SentencePiece tokenizer.model / llama2.c tokenizer.bin), tiktoken (LLaMA-3's
// tokenizer.model), tokenizer_bin (llama2.c tokenizer.bin encoded and decoded, the decoded text
// written as JSON), text_dataset (first byte: kind, use, file name form), zeroshot (first byte:
// the task kind), manifest (npw-manifest.json), workspace (x.npw.json, written back and reread).
const std::vector<Target>& targets();
const Target& target(const std::string& name);  // throws std::invalid_argument when unknown

// Runs `target` on one input. Returns "" when the contract held (accepted, or refused with
// npw::Error), else what broke it ("std::bad_alloc escaped: ...", "tensor 'x' ends past ...").
// `refusal`, when given, receives the npw::Error's message (empty when the input was accepted).
std::string check(const Target& target, std::string_view bytes, std::string* refusal = nullptr);

// Sets the limits the harnesses run under (an allocation cap below libFuzzer's RSS limit).
void initialize();

} // namespace npw::fuzz
