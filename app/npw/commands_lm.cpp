// info, eval, generate, bench: looking at and measuring a language model.
#include "app/npw/commands.h"
#include "app/npw/info_command.h"
#include "core/data/text_datasets.h"
#include "core/eval/generate.h"
#include "core/eval/layerwise_perplexity.h"
#include "core/eval/perplexity.h"
#include "core/experiments/language_workbench.h"
#include "core/models/checkpoint_inspection.h"
#include "core/models/language_model.h"
#include "core/models/model_loader.h"
#include "core/models/non_finite.h"
#include "core/models/sliced_llama.h"
#include "core/text/json_fields.h"
#include "core/text/token_ids.h"
#include "core/text/tokenizer_files.h"
#include "core/util/atomic_file.h"
#include "core/util/content_hash.h"
#include "core/util/error.h"
#include "core/util/library_environment.h"
#include "core/util/number_text.h"
#include "core/util/regular_file.h"
#include "core/util/system_memory.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace npw::cli {

namespace {

// A copy, not a reference into `args`: callers pass the command's name as a temporary string.
std::string modelArgument(const Args& args, const std::string& command) {
    if (args.positional().size() != 1)
        throw Error("'npw " + command + "' takes exactly one MODEL (a checkpoint path or demo:lm), got " +
                    std::to_string(args.positional().size()));
    return args.positional()[0];
}

// A LLaMA or a SliceGPT export (what only runs text: generate, bench, eval's reference).
LanguageModel openCausalFromArgs(const Args& args, const std::string& model) {
    return openCausalLanguageModel(model, chooseRuntime(args.get("device"), args.get("dtype")), args.get("tokenizer"), args.flag("allow-small-vocab"));
}

nlohmann::json jsonOrNull(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

// A SliceGPT export: the dense model's shape and the residual widths it was sliced to.
int runSlicedInfo(const Args& args, const std::string& model) {
    const LanguageModel lm = openCausalFromArgs(args, model);
    const SlicedLlama& s = *lm.sliced;
    const LlamaConfig& c = s.config();
    const nlohmann::json j = {{"model", model}, {"structure", s.structure()}, {"layers", c.num_layers},
                              {"hidden", c.hidden_size}, {"residual_widths", s.residualWidths()},
                              {"heads", c.num_heads}, {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
                              {"intermediate", c.intermediate_size}, {"vocab", c.vocab_size},
                              {"context", c.max_position_embeddings}, {"params", s.parameters()},
                              {"tokenizer", s.tokenizerPath()}, {"device", s.runtime().describe()}};
    printResult(args, j, [&] {
        std::cout << "model          " << model << " (SliceGPT-sliced, " << s.structure() << ")\n"
                  << "layers         " << c.num_layers << "\n"
                  << "hidden         " << c.hidden_size << " (dense width; RMSN divides by it)\n"
                  << "residual       " << joinList(s.residualWidths()) << " (embedding, then after each attention and MLP)\n"
                  << "heads          " << joinList(c.num_heads) << "\n"
                  << "intermediate   " << joinList(c.intermediate_size) << "\n"
                  << "vocab          " << c.vocab_size << "\n"
                  << "parameters     " << s.parameters() << " (shortcut matrices included)\n";
    });
    return 0;
}

int runInfo(const Args& args) {
    const std::string model = modelArgument(args, "info");
    if (isGgufPath(model)) return runGgufInfo(args, model);
    if (isImageModelRequest(args, model)) return runImageInfo(args, model);
    if (SlicedLlama::isSlicedDirectory(model)) return runSlicedInfo(args, model);
    // Config and tensor headers only: no weight is read or converted, at any size. The report is
    // npw-text's too (info_command.h), which answers a llama2.c .bin, a Hugging Face folder and a
    // GGUF file without LibTorch.
    return runLlamaInfo(args, model, inspectLlamaCheckpoint(model),
                        [&] { return chooseRuntime(args.get("device"), args.get("dtype")).describe(); });
}

// An export npw wrote (npw-manifest.json beside the weights) records its calibration text: a
// warning (empty: none) when the text evaluated now is it, by hash, or shares its spans
// (calibrationOverlapWarning) — perplexity on calibration text is not held-out perplexity.
std::string calibrationOverlapOfExport(const std::string& model, const LanguageModel& lm, int64_t vocab,
                                       const std::string& textName, const std::string& textHash,
                                       const std::vector<int32_t>& ids) {
    const std::filesystem::path manifestPath = std::filesystem::path(model) / "npw-manifest.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(manifestPath, ec)) return {};
    try {
        const nlohmann::json manifest = json_fields::readJsonFile(manifestPath.string());
        const nlohmann::json& c = manifest.at("calibration");
        CalibrationPool pool;
        pool.source = c.at("source").get<std::string>();
        pool.sourceHash = c.value("source_hash", std::string());
        // The span check needs the calibration text itself, unchanged since (its hash) and readable.
        const bool idFile = c.value("kind", std::string()).rfind("token ids", 0) == 0;
        if (!pool.sourceHash.empty() && pool.sourceHash != textHash && std::filesystem::is_regular_file(pool.source, ec) &&
            fileContentHash(pool.source) == pool.sourceHash && (idFile || lm.tokenizer))
            pool.stream = idFile ? readTokenIdFile(pool.source, vocab) : lm.encode(readTextFile(pool.source), /*addBos=*/true);
        return calibrationOverlapWarning(pool, textName, textHash, ids);
    } catch (const std::exception&) {
        return {};  // a manifest of another shape says nothing about this; the evaluation itself stands
    }
}

// The model is opened mapped (model_loader.h), which costs no memory, so that its size is known
// before anything is copied: a model whose weights as the runtime holds them (a bfloat16 / float16
// file's matrices stay 2 bytes an element on the CPU) exceed kModelRamFraction of the RAM is
// evaluated layer by layer from the mapping (layerwise_perplexity.h), any other whole — from the
// same mapping on the CPU (LlamaModel reads float32, bfloat16 and float16 views as they are),
// converted onto another device or dtype.
int runEval(const Args& args) {
    const std::string model = modelArgument(args, "eval");
    if (int(args.has("text")) + int(args.has("ids")) + int(args.has("dataset")) != 1)
        throw Error("give exactly one of --text FILE, --ids FILE or --dataset NAME:FILE");
    std::optional<TextDatasetRef> datasetRef;
    if (args.has("dataset") && !(datasetRef = parseTextDatasetRef(args.get("dataset"))))
        throw Error("--dataset: '" + args.get("dataset") + "' is not " + textDatasetSyntax());
    const Runtime runtime = chooseRuntime(args.get("device"), args.get("dtype"));
    // A SliceGPT export (core/models/sliced_llama.h) is no LLaMA: it is evaluated whole, through its logits.
    LlamaCheckpoint checkpoint;
    LanguageModel lm;
    lm.name = model;
    bool layerwise = false;
    if (SlicedLlama::isSlicedDirectory(model)) {
        if (args.flag("layerwise"))
            throw Error("--layerwise: '" + model + "' is a SliceGPT export, which npw evaluates whole");
        lm = openCausalLanguageModel(model, runtime, args.get("tokenizer"), args.flag("allow-small-vocab"));
    } else {
        checkpoint = loadLlamaCheckpoint(model, WeightStorage::Mapped);
        useTokenizerFile(checkpoint, args.get("tokenizer"));
        lm.tokenizer = openTokenizerOf(checkpoint, args.flag("allow-small-vocab"));
        const int64_t physical = physicalMemoryBytes();
        const int64_t gpu = deviceMemoryBytes(runtime);  // 0 on the CPU
        const bool gpuTooSmall = gpu > 0 && static_cast<double>(modelRuntimeBytes(checkpoint, runtime)) >
                                                kModelGpuFraction * static_cast<double>(gpu);
        const bool chosen = !args.flag("layerwise") && (evaluationBelongsLayerwise(checkpoint, runtime, physical) || gpuTooSmall);
        layerwise = args.flag("layerwise") || chosen;
        if (layerwise && args.has("reference"))
            throw Error(std::string("--reference needs both models in memory, which layer-wise evaluation avoids") +
                        (chosen ? " (chosen because the model needs " + byteSizeText(modelRuntimeBytes(checkpoint, runtime)) +
                                      (gpuTooSmall ? ", more than 3/4 of the GPU's " + byteSizeText(gpu) + ")"
                                                   : ", more than half of the " + byteSizeText(physical) + " of RAM)")
                                : std::string(" (--layerwise)")));
        if (chosen && gpuTooSmall)
            std::cerr << "note: the model needs " << byteSizeText(modelRuntimeBytes(checkpoint, runtime)) << " in "
                      << runtime.describe() << ", more than " << 100 * kModelGpuFraction << "% of the GPU's "
                      << byteSizeText(gpu) << (std::getenv("NPW_DEVICE_MEMORY_BYTES") ? " (NPW_DEVICE_MEMORY_BYTES)" : "")
                      << ": evaluating layer by layer, one block on the GPU at a time, weights memory-mapped from the "
                         "checkpoint (--layerwise forces it)\n";
        else if (chosen)
            std::cerr << "note: the model needs " << byteSizeText(modelRuntimeBytes(checkpoint, runtime)) << " in "
                      << runtime.describe() << ", more than " << 100 * kModelRamFraction << "% of this machine's "
                      << byteSizeText(physical) << " of RAM" << (std::getenv("NPW_PHYSICAL_MEMORY_BYTES") ? " (NPW_PHYSICAL_MEMORY_BYTES)" : "")
                      << ": evaluating layer by layer, weights memory-mapped from the checkpoint (--layerwise forces it)\n";
        if (!layerwise) lm.model = std::make_shared<LlamaModel>(checkpoint, runtime);
    }
    const LlamaConfig config = lm.sliced ? lm.sliced->config() : checkpoint.config;
    std::unique_ptr<LanguageModel> reference;
    if (args.has("reference"))
        reference = std::make_unique<LanguageModel>(openCausalFromArgs(args, args.get("reference")));
    // The one protocol (core/eval/evaluation_protocol.h): 2048 capped at the context, every window
    // unless --max-windows caps them.
    EvaluationProtocol protocol;
    if (args.has("seqlen")) protocol.seqlen = args.getInt("seqlen");  // ≥ 2: flag table
    protocol.maxWindows = args.getInt("max-windows");
    PerplexityOptions opt = perplexityOptions(protocol, config);
    opt.batchWindows = args.getInt("batch");
    std::vector<int32_t> ids;
    std::string source;
    nlohmann::json dataset;  // what was read and joined, so a user can check it against their pipeline
    if (datasetRef) {
        source = args.get("dataset");
        const TextDataset data = readTextDataset(*datasetRef, TextDatasetUse::Evaluation);
        EvaluationCorpus corpus =
            evaluationCorpus(data, [&lm](const std::string& t) { return lm.encode(t, /*addBos=*/true); }, opt.seqlen);
        ids = std::move(corpus.ids);
        dataset = {{"name", textDatasetKindName(data.ref.kind)}, {"split", datasetSplitName(data.ref.split)},
                   {"file", data.ref.path}, {"form", data.jsonLines ? "json-lines" : "raw-text"},
                   {"rows", corpus.rows}, {"text_bytes", corpus.textBytes},
                   {"tokens_before_cut", corpus.tokensBeforeCut}};
    } else if (args.has("text")) {
        source = args.get("text");
        const std::string text = readTextInput(source, "evaluation text");
        if (text.empty()) throw Error("evaluation text '" + source + "' is empty");
        ids = lm.encode(text, /*addBos=*/true);  // the protocol: tokenize once, BOS once at the start
    } else {
        source = args.get("ids");
        ids = readTokenIdFile(source, config.vocab_size);
    }
    // Which text, exactly: its name (as a sweep row names it) and its bytes' hash.
    const std::string textFile = datasetRef ? datasetRef->path : source;
    const std::string textName = datasetRef ? datasetRef->label() : std::filesystem::path(source).stem().string();
    const std::string textHash = fileContentHash(textFile);
    const std::string overlap = calibrationOverlapOfExport(model, lm, config.vocab_size, textName, textHash, ids);
    if (!overlap.empty()) std::cerr << "warning: " << overlap << "\n";
    DecodeFn decode;
    if (!args.has("ids")) decode = [&lm](const std::vector<int32_t>& v) { return lm.decode(v); };
    PerplexityResult r;
    if (layerwise) {
        r = evaluatePerplexityLayerwise(checkpoint, runtime, ids, opt, decode, terminalProgress());
    } else {
        r = evaluatePerplexity(lm.causal(), ids, opt, reference ? &reference->causal() : nullptr, decode,
                               terminalProgress());
    }
    nlohmann::json j = {{"model", model}, {"input", source}, {"ppl", r.ppl}, {"nll", r.nll}, {"tokens", r.tokens},
                        {"windows", r.windows}, {"seqlen", r.seqlen}, {"corpus_tokens", ids.size()},
                        {"stride", r.seqlen}, {"bits_per_byte", jsonOrNull(r.bitsPerByte)}, {"bytes", r.bytes},
                        {"path", r.path}, {"eval_seconds", r.seconds}, {"tokens_per_second", r.tokensPerSecond()},
                        {"device", runtime.describe()}, {"max_windows", protocol.maxWindows},
                        {"text_name", textName}, {"text_hash", textHash}};
    if (!overlap.empty()) j["warnings"] = {overlap};
    if (!dataset.is_null()) j["dataset"] = dataset;
    if (reference) {
        j["kl"] = r.kl;
        j["reference"] = args.get("reference");
    }
    printResult(args, j, [&] {
        std::cout << std::fixed << std::setprecision(4) << "model     " << model << "\ninput     " << source
                  << "\nppl       " << r.ppl << "\nnll       " << r.nll << " nats/token\n";
        if (std::isfinite(r.bitsPerByte)) std::cout << "bits/byte " << r.bitsPerByte << "\n";
        if (reference) std::cout << "kl        " << r.kl << " nats/token (reference " << args.get("reference") << ")\n";
        std::cout << "scored    " << r.tokens << " tokens in " << r.windows << " windows of " << r.seqlen << " (corpus "
                  << ids.size() << " tokens)\n";
        std::cout << std::setprecision(1) << "speed     " << r.tokensPerSecond() << " tokens/s through the model ("
                  << r.path << ", " << runtime.describe() << ", loading excluded)\n";
        if (!dataset.is_null())
            std::cout << "dataset   " << dataset["name"].get<std::string>() << ", " << dataset["split"].get<std::string>()
                      << " split, " << dataset["rows"] << " rows (" << dataset["form"].get<std::string>() << ")\n";
    });
    return 0;
}

std::vector<int32_t> parseIdList(const std::string& text) {
    std::vector<int32_t> ids;
    std::istringstream in(text);
    std::string word;
    while (in >> word) {
        try {
            ids.push_back(std::stoi(word));
        } catch (const std::exception&) {
            throw Error("--prompt-ids: '" + word + "' is not an integer token id");
        }
    }
    return ids;
}

// The prompt's logits [T, vocab] as a NumPy .npy file (format version 1.0: magic, header dict
// padded with spaces to a multiple of 64 bytes, then little-endian float32 in C order), so a
// reference outside npw (numpy, torch) reads them with np.load. A non-finite logit is an error:
// nothing is written.
void writeLogitsNpy(const std::string& path, const at::Tensor& logits) {
    const at::Tensor values = logits.to(at::kFloat).contiguous().cpu();
    if (!allFinite(values))
        throw Error("--logits '" + path + "': the model's logits for this prompt are not all finite; nothing written");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(values.size(0)) + ", " +
                         std::to_string(values.size(1)) + "), }";
    const size_t unpadded = 10 + header.size() + 1;  // magic (6) + version (2) + length (2) + header + '\n'
    header.append((64 - unpadded % 64) % 64, ' ');
    header.push_back('\n');
    writeFileAtomically(path, [&](std::ostream& out) {
        out.write("\x93NUMPY\x01\x00", 8);
        const uint16_t length = static_cast<uint16_t>(header.size());
        const char lengthBytes[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
        out.write(lengthBytes, 2);
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(reinterpret_cast<const char*>(values.data_ptr<float>()),
                  static_cast<std::streamsize>(values.numel() * sizeof(float)));  // x86-64 and aarch64: little-endian
    });
}

int runGenerate(const Args& args) {
    const std::string model = modelArgument(args, "generate");
    if (isImageModelRequest(args, model)) {
        if (args.has("logits")) throw Error("--logits: '" + model + "' is an image model; --logits is for language models");
        return runImageGenerate(args, model);
    }
    LanguageModel lm = openCausalFromArgs(args, model);
    const LlamaConfig& c = lm.causal().config();
    std::vector<int32_t> prompt;
    if (args.has("prompt-ids")) {
        prompt = parseIdList(args.get("prompt-ids"));
    } else if (lm.tokenizer) {
        prompt = lm.encode(args.get("prompt"), /*addBos=*/true);
    } else if (args.has("prompt")) {
        // Never generate from BOS in place of a prompt that was given: the output would look like an answer to it.
        throw Error("model '" + model + "' has no tokenizer (no tokenizer.json, tokenizer.model or tokenizer.bin beside "
                    "it), so --prompt text cannot be encoded; give one with --tokenizer FILE, or the prompt as token "
                    "ids with --prompt-ids");
    } else {
        prompt = {static_cast<int32_t>(c.bos_token_id)};  // no tokenizer, no prompt: start from BOS, print ids
    }
    SamplingOptions o;
    o.maxNewTokens = args.getInt("tokens");
    o.temperature = args.has("temperature") ? args.getDouble("temperature") : 0.0;
    o.topP = args.getDouble("top-p");
    o.seed = static_cast<uint64_t>(args.getInt("seed"));
    if (!args.flag("no-stop")) o.stopToken = c.eos_token_id;
    o.keepPromptLogits = args.has("logits");
    if (lm.model) runOutputGuard().addModel(lm.model->checkpoint().source);  // the file loaded, as a source
    GenerationResult g = generate(lm.causal(), prompt, o);
    if (o.keepPromptLogits) writeLogitsNpy(args.get("logits"), g.promptLogits);
    nlohmann::json j = {{"model", model}, {"structure", lm.causal().structure()}, {"prompt_ids", prompt}, {"ids", g.tokens},
                        {"prefill_seconds", g.prefillSeconds}, {"decode_seconds", g.decodeSeconds},
                        {"temperature", o.temperature}, {"top_p", o.topP}, {"seed", o.seed}};
    if (lm.tokenizer) {
        j["prompt"] = args.has("prompt-ids") ? lm.decode(prompt) : args.get("prompt");
        // Decoded after the prompt, so the continuation keeps its leading space.
        std::vector<int32_t> all = prompt;
        all.insert(all.end(), g.tokens.begin(), g.tokens.end());
        const std::string whole = lm.decode(all), head = lm.decode(prompt);
        j["text"] = whole.rfind(head, 0) == 0 ? whole.substr(head.size()) : lm.decode(g.tokens);
    }
    printResult(args, j, [&] {
        if (lm.tokenizer) {
            std::cout << j["prompt"].get<std::string>() << j["text"].get<std::string>() << "\n";
        } else {
            for (size_t i = 0; i < g.tokens.size(); ++i) std::cout << (i ? " " : "") << g.tokens[i];
            std::cout << "\n";
        }
    });
    return 0;
}

int runBench(const Args& args) {
    if (args.has("write-synthetic-image")) return runWriteSyntheticImageModel(args);
    if (args.has("write-synthetic")) return runWriteSyntheticCheckpoint(args);
    if (args.has("suite") || args.has("synthetic")) return runPruningBench(args);
    const std::string model = modelArgument(args, "bench");
    LanguageModel lm = openCausalFromArgs(args, model);
    if (lm.sliced && args.flag("llamacpp"))
        throw Error("--llamacpp: '" + model + "' is a SliceGPT-sliced model (" + kSlicedModelFormat +
                    "), which llama.cpp cannot run (no GGUF form has its shortcut matrices)");
    BenchResult b = benchmarkGeneration(lm.causal(), args.getInt("prompt-tokens"), args.getInt("decode-tokens"),
                                        static_cast<int>(args.getInt("repeats")), terminalProgress());
    nlohmann::json llamaCpp;
    if (args.flag("llamacpp")) {
        const LlamaCheckpoint& checkpoint = lm.model->checkpoint();
        const std::string dtype = args.has("llamacpp-dtype") ? args.get("llamacpp-dtype") : storedMatrixGgufDtype(checkpoint);
        llamaCpp = benchLlamaCpp(checkpoint, b.promptTokens, b.decodeTokens, b.repeats,
                                 static_cast<int>(args.getInt("llamacpp-threads")), dtype);
    }
    std::string heldDtypes;  // "BFloat16 1.8 MiB, Float 4.0 KiB"
    for (const auto& [dtype, mib] : b.weightsMiBByDtype) {
        std::ostringstream part;  // the norms of a 16-bit model are KiB beside MiB of matrices
        part << std::fixed << std::setprecision(1) << (mib < 1.0 ? mib * 1024.0 : mib) << (mib < 1.0 ? " KiB" : " MiB");
        heldDtypes += (heldDtypes.empty() ? "" : ", ") + dtype + " " + part.str();
    }
    nlohmann::json j = {{"model", model}, {"structure", lm.causal().structure()}, {"device", b.device}, {"params", b.parameters},
                        {"weights_mib", b.weightsMiB}, {"weights_mib_by_dtype", b.weightsMiBByDtype}, {"prompt_tokens", b.promptTokens},
                        {"decode_tokens", b.decodeTokens}, {"repeats", b.repeats},
                        {"prefill_tokens_per_s", b.prefillTokensPerSecond},
                        {"decode_tokens_per_s", b.decodeTokensPerSecond}, {"peak_memory_mib", b.peakMemoryMiB},
                        {"peak_memory_kind", b.peakMemoryKind}, {"blas", blasKernelDescription()}};
    if (!llamaCpp.is_null()) j["llamacpp"] = llamaCpp;
    printResult(args, j, [&] {
        std::cout << std::fixed << std::setprecision(1) << "model            " << model << "\n"
                  << "device           " << b.device << "\n"
                  << "BLAS             " << (j["blas"].get<std::string>().empty() ? "not OpenBLAS" : j["blas"].get<std::string>()) << "\n"
                  << "parameters       " << b.parameters << " (" << b.weightsMiB << " MiB as held: " << heldDtypes << ")\n"
                  << "prefill          " << b.prefillTokensPerSecond << " tokens/s (" << b.promptTokens
                  << "-token prompt, median of " << b.repeats << ")\n"
                  << "decode           " << b.decodeTokensPerSecond << " tokens/s (" << b.decodeTokens
                  << " tokens, batch 1, KV cache)\n"
                  << "peak memory      " << b.peakMemoryMiB << " MiB (" << b.peakMemoryKind << ")\n";
        if (!llamaCpp.is_null())
            std::cout << "llama.cpp        prefill " << llamaCpp["prefill_tokens_per_s"].get<double>() << ", decode "
                      << llamaCpp["decode_tokens_per_s"].get<double>() << " tokens/s (same weights as GGUF " << llamaCpp["gguf_dtype"].get<std::string>() << ", "
                      << llamaCpp["threads"].get<int>() << " threads; greedy ids "
                      << (llamaCpp["same_greedy_ids"].get<bool>()
                              ? std::string("identical to npw's")
                              : "the first " + std::to_string(llamaCpp["greedy_ids_agreeing"].get<size_t>()) + " of " +
                                    std::to_string(llamaCpp["npw_ids"].size()) + " identical to npw's, then different")
                      << ")\n";
    });
    return 0;
}

} // namespace

void addLanguageModelCommands(std::vector<Command>& out) {
    out.push_back({"info", "MODEL|FILE.gguf [--gpt-model B|L|XL|XXL|3B --image-size 256|384] [--json]",
                   "Show a model's architecture and parameter count (language or LlamaGen image model), or a GGUF file's metadata and tensors.",
                   flagsFor("info"), runInfo,
                   // npw-text answers a llama2.c .bin's, a Hugging Face folder's and a GGUF file's info
                   // (info_command.h, app/text) and hands the rest here.
                   /*withoutLibTorch=*/true});
    out.push_back({"eval", "MODEL (--text FILE | --ids FILE | --dataset NAME:FILE) [--seqlen N] [--max-windows K] [--reference MODEL] [--layerwise]",
                   "Perplexity (GPTQ/FLAP protocol), bits per byte and KL divergence from a reference.",
                   flagsFor("eval"), runEval});
    out.push_back({"generate",
                   "MODEL [--prompt TEXT] [--tokens N] [--temperature T] [--top-p P] [--seed S]\n"
                   "       npw generate IMAGE_MODEL --class K[,K...] [--n N] [--cfg S] [--cfg-interval I] [--top-k K]\n"
                   "           [--vq FILE] [--gpt-model B|L|XL|XXL|3B --image-size 256|384] --out FILE.png",
                   "Generate a text continuation (greedy at temperature 0), or class-conditional images (PNG).",
                   flagsFor("generate"), runGenerate});
    out.push_back({"bench", "MODEL [--prompt-tokens N] [--decode-tokens N] [--repeats R] [--llamacpp] | --suite pruning | --synthetic 1b | "
                   "--suite calibration-memory [--synthetic 1b] [--layers N] [--calib-samples N] [--calib-seqlen L]",
                   "Prefill and decode speed (tokens/s) and peak memory; pruning benchmarks with --suite/--synthetic.",
                   flagsFor("bench"), runBench});
}

} // namespace npw::cli
