#include "core/eval/evaluation_protocol.h"
#include "core/eval/perplexity.h"

#include <algorithm>

namespace npw {

int64_t EvaluationProtocol::seqlenFor(int64_t context) const {
    const int64_t want = seqlen > 0 ? seqlen : kProtocolSeqlen;
    return std::min(want, context);
}

EvaluationProtocol::Resolved EvaluationProtocol::resolve(int64_t context, int64_t textTokens) const {
    Resolved r;
    r.seqlen = seqlenFor(context);
    r.availableWindows = r.seqlen > 0 ? std::max<int64_t>(textTokens, 0) / r.seqlen : 0;
    r.maxWindows = std::max<int64_t>(maxWindows, 0);
    r.windows = r.maxWindows > 0 ? std::min(r.availableWindows, r.maxWindows) : r.availableWindows;
    r.tokens = r.windows * std::max<int64_t>(r.seqlen - 1, 0);
    return r;
}

PerplexityOptions perplexityOptions(const EvaluationProtocol& protocol, const LlamaConfig& config) {
    PerplexityOptions o;
    o.seqlen = protocol.seqlenFor(config.max_position_embeddings);
    o.maxWindows = protocol.maxWindows;
    return o;
}

} // namespace npw
