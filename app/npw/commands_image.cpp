// `npw generate` and `npw info` for class-conditional image models (LlamaGen c2i GPT + VQ).
// The language-model commands (commands_lm.cpp) hand over when the model is an image model.
#include "app/npw/commands.h"
#include "core/util/atomic_file.h"
#include "core/eval/image_generate.h"
#include "core/io/image_png.h"
#include "core/models/llamagen.h"
#include "core/models/parameter_count.h"
#include "core/models/vq_model.h"
#include "core/prune/pruner.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/text/json_fields.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;

namespace npw::cli {

ImageSamplingOptions samplingFromArgs(const Args& args) {
    ImageSamplingOptions o;
    o.cfgScale = args.getDouble("cfg");
    if (args.has("cfg-interval")) o.cfgInterval = args.getInt("cfg-interval");
    o.temperature = args.has("temperature") ? args.getDouble("temperature") : 1.0;  // LlamaGen's default
    o.topK = args.getInt("top-k");
    if (args.has("top-p")) o.topP = args.getDouble("top-p");
    o.seed = static_cast<uint64_t>(args.getInt("seed"));
    o.batchSize = args.getInt("batch");
    o.validate();
    return o;
}

bool isImageModelRequest(const Args& args, const std::string& model) {
    return args.has("class") || args.has("vq") || args.has("gpt-model") || isLlamaGenModel(model);
}

LlamaGenCheckpoint openGpt(const Args& args, const std::string& model, int64_t downsample) {
    LlamaGenLoadOptions o;
    if (args.has("gpt-model"))
        o.config = llamaGenNamedConfig(args.get("gpt-model"), args.getInt("image-size"), 16384, 1000, downsample);
    try {
        return loadLlamaGenCheckpoint(model, o);
    } catch (const LlamaGenSizeUnknown&) {
        throw Error("LlamaGen checkpoint '" + model +
                    "' does not say its size: name it with --gpt-model B|L|XL|XXL|3B and --image-size 256|384");
    }
}

std::string vqPathFor(const Args& args, const std::string& model) {
    if (args.has("vq")) return args.get("vq");
    const std::string path = resolveModelPath(model);
    if (fs::is_directory(fs::path(path) / "vq")) return (fs::path(path) / "vq").string();
    throw Error("image model '" + model + "' needs its VQ tokenizer: give --vq FILE (LlamaGen's vq_ds16_c2i.pt or an npw VQ directory)");
}

// Class names from the model's config.json ("class_names"), if any.
std::vector<std::string> classNames(const std::string& model) {
    try {
        const fs::path config = fs::path(resolveModelPath(model)) / "config.json";
        if (!fs::is_regular_file(config)) return {};
        const nlohmann::json j = json_fields::readJsonFile(config.string());
        if (j.contains("class_names")) return j.at("class_names").get<std::vector<std::string>>();
    } catch (const std::exception&) {
    }
    return {};
}

namespace {

nlohmann::json configJson(const LlamaGenConfig& c) {
    const LlamaConfig& t = c.transformer;
    return {{"model_type", "llamagen-c2i"}, {"name", c.name}, {"layers", t.num_layers}, {"dim", t.hidden_size},
            {"heads", t.num_heads},        {"head_dim", t.head_dim}, {"ffn", t.intermediate_size},
            {"vocab", t.vocab_size},       {"num_classes", c.num_classes}, {"grid", c.grid},
            {"image_size", c.image_size},  {"downsample", c.downsample}};
}

std::string joined(const std::vector<int64_t>& v) {
    std::ostringstream out;
    for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
    return out.str();
}

} // namespace

int runImageInfo(const Args& args, const std::string& model) {
    LlamaGenCheckpoint ck = openGpt(args, model, 16);
    const LlamaGenConfig& c = ck.config;
    const int64_t params = checkpointParameters(ck.transformer()) + ck.classEmbedding.numel();
    nlohmann::json j = configJson(c);
    j["model"] = model;
    j["source"] = ck.source;
    j["params"] = params;
    printResult(args, j, [&] {
        std::cout << "model          " << model << " (LlamaGen class-conditional GPT)\n"
                  << "source         " << ck.source << "\n"
                  << "size           " << c.name << "\n"
                  << "layers         " << c.transformer.num_layers << "\n"
                  << "dim            " << c.transformer.hidden_size << "\n"
                  << "heads          " << joined(c.transformer.num_heads) << " (head dim " << c.transformer.head_dim << ")\n"
                  << "ffn            " << joined(c.transformer.intermediate_size) << "\n"
                  << "codebook       " << c.transformer.vocab_size << "\n"
                  << "classes        " << c.num_classes << " (+ the null class)\n"
                  << "tokens         " << c.grid << "×" << c.grid << " (" << c.image_size << " px at downsampling "
                  << c.downsample << ")\n"
                  << "parameters     " << params << "\n";
    });
    return 0;
}

int runImageGenerate(const Args& args, const std::string& model) {
    if (!args.has("class")) throw Error("image model '" + model + "': give --class K (or a list K1,K2,...)");
    if (!args.has("out")) throw Error("image generation writes a PNG: give --out FILE.png");
    // --out against MODEL and the other inputs: main's output guard (flag_table.h).
    const std::vector<int64_t> classes = args.getIntList("class");
    const int64_t n = args.getInt("n");
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    auto vq = VqModel::load(vqPathFor(args, model), runtime);
    LlamaGenModel gpt(openGpt(args, model, vq->config().downsample()), runtime);
    const LlamaGenConfig& c = gpt.config();
    if (c.transformer.vocab_size != vq->config().codebookSize)
        throw Error("the GPT's vocabulary (" + std::to_string(c.transformer.vocab_size) + ") is not the VQ codebook (" +
                    std::to_string(vq->config().codebookSize) + " codes in " + vq->source() + ")");
    if (c.downsample != vq->config().downsample())
        throw Error("the VQ model '" + vq->source() + "' downsamples by " + std::to_string(vq->config().downsample()) +
                    ", but the GPT '" + model + "' was made for a tokenizer that downsamples by " +
                    std::to_string(c.downsample) + " (" + std::to_string(c.image_size) + " px images)");

    const ImageSamplingOptions o = samplingFromArgs(args);
    std::vector<int64_t> all;
    for (int64_t k : classes)
        for (int64_t i = 0; i < n; ++i) all.push_back(k);
    ImageTokens tokens = generateImageTokens(gpt, all, o, 0, terminalProgress());
    at::Tensor codes = tokens.tokens.view({-1, c.grid, c.grid});
    at::Tensor images = vq->decode(codes);
    const std::string out = args.get("out");
    const std::vector<std::string> names = classNames(model);
    // Titled with the model (and an export's method and ρ), so a picture says where it came from.
    if (images.size(0) == 1) {
        writePng(out, images[0]);  // one sample, not a comparison: the raw image
    } else {
        std::vector<std::string> labels;
        labels.reserve(all.size());
        for (int64_t k : all)
            labels.push_back(k < static_cast<int64_t>(names.size()) ? std::to_string(k) + " " + names[k]
                                                                    : "class " + std::to_string(k));
        GridOptions g;
        g.columns = n > 1 ? n : std::min<int64_t>(static_cast<int64_t>(all.size()), 8);
        writePng(out, withTitle(imageGrid(images, labels, g), modelLabel(model)));
    }
    nlohmann::json j = {{"model", model},
                        {"vq", vq->source()},
                        {"classes", all},
                        {"images", all.size()},
                        {"cfg", o.cfgScale},
                        {"cfg_interval", o.cfgInterval},
                        {"temperature", o.temperature},
                        {"top_k", o.topK},
                        {"top_p", o.topP},
                        {"seed", o.seed},
                        {"image_size", images.size(2)},
                        {"tokens_per_image", c.blockSize()},
                        {"seconds", tokens.seconds},
                        {"tokens_per_s", tokens.tokensPerSecond},
                        {"out", out}};
    printResult(args, j, [&] {
        std::cout << std::fixed << std::setprecision(1) << "wrote " << out << ": " << all.size() << " image"
                  << (all.size() == 1 ? "" : "s") << " of " << images.size(2) << "×" << images.size(3) << " (classes "
                  << args.get("class") << ", cfg " << o.cfgScale << ", seed " << o.seed << ") in " << tokens.seconds
                  << " s, " << tokens.tokensPerSecond << " tokens/s\n";
    });
    return 0;
}

} // namespace npw::cli
