#include "core/text/bpe_model.h"

#include "core/text/utf8.h"
#include "core/util/error.h"

#include <algorithm>
#include <cstdio>
#include <queue>

namespace npw {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeModelOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
    if (!options_.unkToken.empty()) {
        unkId_ = idOf(options_.unkToken);
        if (unkId_ < 0)
            throw Error("model.unk_token '" + options_.unkToken + "' is not in model.vocab");
    }
    for (int byte = 0; byte < 256; ++byte) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", byte);
        byteTokenIds_[byte] = idOf(name);
    }
    merges_.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [left, right] = merges[rank];
        const int32_t leftId = idOf(left), rightId = idOf(right), mergedId = idOf(left + right);
        const char* missing = leftId < 0 ? left.c_str() : rightId < 0 ? right.c_str() : nullptr;
        if (missing)
            throw Error("merge " + std::to_string(rank) + " ('" + left + "' '" + right + "') names '" +
                        missing + "', which is not in model.vocab");
        if (mergedId < 0)
            throw Error("merge " + std::to_string(rank) + " ('" + left + "' '" + right + "') makes '" +
                        left + right + "', which is not in model.vocab");
        // A repeated pair keeps its last rank, as Hugging Face's loader does.
        merges_[pairKey(leftId, rightId)] = Merge{static_cast<int32_t>(rank), mergedId};
    }
}

int32_t BpeModel::idOf(const std::string& token) const {
    const auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
}

std::vector<int32_t> BpeModel::initialSymbols(std::string_view word) const {
    std::vector<int32_t> symbols;
    symbols.reserve(word.size());
    bool unknownPending = false;  // an unknown token waits, so that fuse_unk can extend it
    auto flushUnknown = [&] {
        if (unknownPending)
            symbols.push_back(unkId_);
        unknownPending = false;
    };
    std::string character;
    for (std::size_t pos = 0; pos < word.size();) {
        // Callers pass valid UTF-8; a stray byte would still be taken alone, never loop forever.
        const std::size_t length = std::max<std::size_t>(1, utf8::charLength(word, pos));
        character.assign(word.substr(pos, length));
        pos += length;
        if (const int32_t id = idOf(character); id >= 0) {
            flushUnknown();
            symbols.push_back(id);
            continue;
        }
        if (options_.byteFallback) {
            bool allBytesKnown = true;
            for (unsigned char byte : character)
                allBytesKnown = allBytesKnown && byteTokenIds_[byte] >= 0;
            if (allBytesKnown) {
                flushUnknown();
                for (unsigned char byte : character)
                    symbols.push_back(byteTokenIds_[byte]);
                continue;
            }
        }
        if (unkId_ < 0)
            continue;  // no unknown token: Hugging Face drops the character
        if (!options_.fuseUnk)
            flushUnknown();
        unknownPending = true;
    }
    flushUnknown();
    return symbols;
}

void BpeModel::mergeByRank(std::vector<int32_t>& symbols) const {
    if (symbols.size() < 2)
        return;
    // A doubly linked list over `symbols`; merged-away entries get id -1.
    const int32_t count = static_cast<int32_t>(symbols.size());
    std::vector<int32_t> next(count), prev(count);
    for (int32_t i = 0; i < count; ++i) {
        next[i] = i + 1 < count ? i + 1 : -1;
        prev[i] = i - 1;
    }
    struct Candidate {
        int32_t rank;
        int32_t pos;  // the left symbol
        int32_t mergedId;
        bool operator>(const Candidate& other) const {
            return rank != other.rank ? rank > other.rank : pos > other.pos;
        }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto consider = [&](int32_t left) {
        if (left < 0 || next[left] < 0)
            return;
        const auto it = merges_.find(pairKey(symbols[left], symbols[next[left]]));
        if (it != merges_.end())
            queue.push({it->second.rank, left, it->second.mergedId});
    };
    for (int32_t i = 0; i + 1 < count; ++i)
        consider(i);

    while (!queue.empty()) {
        const Candidate top = queue.top();
        queue.pop();
        // Entries go stale when a neighbour merged first: check the pair still makes this token.
        if (symbols[top.pos] < 0 || next[top.pos] < 0)
            continue;
        const int32_t right = next[top.pos];
        const auto it = merges_.find(pairKey(symbols[top.pos], symbols[right]));
        if (it == merges_.end() || it->second.mergedId != top.mergedId)
            continue;
        symbols[top.pos] = top.mergedId;
        symbols[right] = -1;
        next[top.pos] = next[right];
        if (next[right] >= 0)
            prev[next[right]] = top.pos;
        consider(prev[top.pos]);
        consider(top.pos);
    }
    std::size_t kept = 0;
    for (int32_t id : symbols)
        if (id >= 0)
            symbols[kept++] = id;
    symbols.resize(kept);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
    if (options_.ignoreMerges) {
        if (const int32_t id = idOf(std::string(word)); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    std::vector<int32_t> symbols = initialSymbols(word);
    mergeByRank(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
}

} // namespace npw
