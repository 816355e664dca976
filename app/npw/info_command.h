#pragma once
// `npw info` of a LLaMA checkpoint or a GGUF file: what it prints, without LibTorch. npw-run's
// info (commands_lm.cpp) gives it any checkpoint's summary read through the loaders; npw-text
// (app/text) a llama2.c .bin's or a Hugging Face folder's, read from headers without loading
// LibTorch, which otherwise costs every start 0.4 s of CPU (app/launcher/main.cpp). One text,
// one JSON: they cannot drift.
#include "app/npw/cli_args.h"
#include "core/models/checkpoint_summary.h"

#include <functional>
#include <string>
#include <vector>

namespace npw::cli {

// The runtime's description ("cpu (2 threads) Float"), which needs LibTorch: asked for only when
// the answer shows it (--json) or the command line chose a runtime (--device, --dtype: chosen,
// and refused if unavailable, as every model command does).
using RuntimeDescription = std::function<std::string()>;
bool infoNeedsRuntime(const Args& args);

// "4,4,2": a per-layer list as info prints it (a SliceGPT model's too).
std::string joinList(const std::vector<int64_t>& v);

// `npw info FILE.gguf`: header, metadata (long arrays shortened) and tensors of a GGUF file
// (core/io/gguf.h reads them without LibTorch).
bool isGgufPath(const std::string& path);
int runGgufInfo(const Args& args, const std::string& path);

int runLlamaInfo(const Args& args, const std::string& model, const CheckpointSummary& summary,
                 const RuntimeDescription& runtime);

} // namespace npw::cli
