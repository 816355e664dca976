// tokenize in npw-run's table (the command itself: tokenize_command.cpp, which npw-text runs
// without LibTorch). Here a model whose vocabulary only its tensors say is inspected.
#include "app/npw/commands.h"
#include "app/npw/tokenize_command.h"
#include "core/models/checkpoint_inspection.h"

namespace npw::cli {

void addTokenizeCommand(std::vector<Command>& out) {
    out.push_back({"tokenize", kTokenizeUsage, kTokenizeSummary, flagsFor("tokenize"),
                   [](const Args& args) {
                       return runTokenize(args, [](const std::string& model) {
                           return inspectLlamaCheckpoint(model).config.vocab_size;
                       });
                   },
                   /*withoutLibTorch=*/true});
}

} // namespace npw::cli
