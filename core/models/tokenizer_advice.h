#pragma once
// "model 'NAME' has no tokenizer (...); " and how to give one, in the words of the program
// speaking (core/util/front_end.h): `--tokenizer FILE` on the command line; in the studio, which
// takes no flags, the files it finds beside the checkpoint (tokenizerFileOfModel). Defined in
// language_model.cpp; its own header so that the message's users need not see LanguageModel.
#include <cstdint>
#include <string>

namespace npw {

std::string noTokenizerMessage(const std::string& name, int64_t vocab);

} // namespace npw
