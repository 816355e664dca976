#include "core/models/llama_init.h"

#include <ATen/ATen.h>
#include <cmath>

namespace npw {

namespace {

at::Tensor normalInit(at::IntArrayRef shape, double stdev, at::Generator& gen) {
    return at::normal(0.0, stdev, shape, gen);
}

} // namespace

LlamaWeights initLlamaWeights(const LlamaConfig& c, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const double s = 0.02, sOut = 0.02 / std::sqrt(2.0 * static_cast<double>(c.num_layers));
    LlamaWeights w;
    w.embed = normalInit({c.vocab_size, c.hidden_size}, s, gen);
    for (int64_t l = 0; l < c.num_layers; ++l) {
        LlamaLayerWeights L;
        const int64_t q = c.num_heads[l] * c.head_dim, kv = c.num_kv_heads[l] * c.head_dim;
        const int64_t inter = c.intermediate_size[l];
        L.attn_norm = at::ones({c.hidden_size});
        L.wq = normalInit({q, c.hidden_size}, s, gen);
        L.wk = normalInit({kv, c.hidden_size}, s, gen);
        L.wv = normalInit({kv, c.hidden_size}, s, gen);
        L.wo = normalInit({c.hidden_size, q}, sOut, gen);
        L.ffn_norm = at::ones({c.hidden_size});
        L.w_gate = normalInit({inter, c.hidden_size}, s, gen);
        L.w_up = normalInit({inter, c.hidden_size}, s, gen);
        L.w_down = normalInit({c.hidden_size, inter}, sOut, gen);
        w.layers.push_back(L);
    }
    w.final_norm = at::ones({c.hidden_size});
    w.lm_head = c.tie_word_embeddings ? w.embed : normalInit({c.vocab_size, c.hidden_size}, s, gen);
    return w;
}

} // namespace npw
