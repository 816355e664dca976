#include "core/text/token_ids.h"

#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <fstream>

namespace npw {

std::vector<int32_t> readTokenIdFile(const std::string& path, int64_t vocabSize) {
    const RegularFile file = RegularFile::open(path, "token id file");  // a FIFO is refused, never waited on
    if (file.size() > kMaxTextInputBytes)
        throw Error("token id file '" + path + "' is " + std::to_string(file.size()) + " bytes; npw reads at most " +
                    std::to_string(kMaxTextInputBytes >> 20) + " MiB of token ids");
    std::ifstream in(path);
    if (!in) throw Error("cannot open token id file '" + path + "'");
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word) {
        size_t used = 0;
        long long value = -1;
        try {
            value = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size())
            throw Error("token id file '" + path + "': '" + word + "' (word " + std::to_string(ids.size() + 1) +
                        ") is not an integer");
        if (value < 0 || (vocabSize > 0 && value >= vocabSize))
            throw Error("token id file '" + path + "': id " + word + " (word " + std::to_string(ids.size() + 1) +
                        ") is outside the vocabulary of " + std::to_string(vocabSize));
        ids.push_back(static_cast<int32_t>(value));
    }
    if (ids.empty()) throw Error("token id file '" + path + "' holds no token ids");
    return ids;
}

} // namespace npw
