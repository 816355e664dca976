#include "tests/fuzz/fuzz_targets.h"

#include "core/data/text_datasets.h"
#include "core/eval/zeroshot.h"
#include "core/experiments/workspace.h"
#include "core/io/export_manifest.h"
#include "core/io/gguf.h"
#include "core/io/idx_file.h"
#include "core/io/pickle.h"
#include "core/io/safetensors.h"
#include "core/io/torch_checkpoint.h"
#include "core/models/image_classifier.h"
#include "core/models/llama_config.h"
#include "core/models/llamagen.h"
#include "core/models/model_loader.h"
#include "core/models/vq_model.h"
#include "core/text/llama2c_tokenizer.h"
#include "core/text/json_output.h"
#include "core/text/sentencepiece_tokenizer.h"
#include "core/text/tiktoken.h"
#include "core/text/tokenizer.h"
#include "core/text/utf8.h"
#include "core/util/error.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <typeinfo>
#include <unistd.h>

namespace fs = std::filesystem;

namespace npw::fuzz {

namespace {

// A broken contract: what the reader accepted is inconsistent.
struct Violation : std::logic_error {
    using std::logic_error::logic_error;
};

[[noreturn]] void violated(const std::string& what) { throw Violation(what); }

// Inputs go through the file readers (they map or stream files): one private folder per process.
class Scratch {
public:
    // In memory where possible (/dev/shm): on a disk, writing each input costs 20 times the parse.
    Scratch() {
        const char* base = std::getenv("NPW_FUZZ_TMPDIR");
        if (!base || !*base) base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::getenv("TMPDIR");
        std::string pattern = std::string(base && *base ? base : "/tmp") + "/npw-fuzz-XXXXXX";
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a scratch folder for the fuzz inputs");
        dir_ = pattern;
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    // A fresh sub-folder's path (emptied), for readers that take a model directory.
    std::string folder(const std::string& name) {
        const fs::path path = dir_ / name;
        std::error_code ec;
        fs::remove_all(path, ec);
        fs::create_directories(path);
        return path.string();
    }
    std::string write(const std::string& name, std::string_view bytes) {
        const fs::path path = dir_ / name;
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) throw std::runtime_error("cannot write the fuzz input " + path.string());
        return path.string();
    }

private:
    fs::path dir_;
};

Scratch& scratch() {
    static Scratch instance;
    return instance;
}

// Tensors up to this size are read back too (bigger ones only have their metadata checked).
constexpr uint64_t kLoadBytes = 1 << 20;

uint64_t mul(uint64_t a, uint64_t b, const std::string& what) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) violated(what + ": the accepted sizes overflow");
    return r;
}

uint64_t add(uint64_t a, uint64_t b, const std::string& what) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) violated(what + ": the accepted offsets overflow");
    return r;
}

uint64_t elementCount(const std::vector<int64_t>& shape, const std::string& what) {
    uint64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) violated(what + ": a negative dimension was accepted");
        n = mul(n, static_cast<uint64_t>(d), what);
    }
    return n;
}

uint64_t safetensorsDtypeBytes(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "BOOL" || dtype == "U8" || dtype == "I8" || dtype == "F8_E5M2" || dtype == "F8_E4M3") return 1;
    violated("an unknown dtype '" + dtype + "' was accepted");
}

// ---- safetensors

void safetensors(std::string_view bytes) {
    const std::string path = scratch().write("input.safetensors", bytes);
    auto file = SafeTensorsFile::open(path);
    uint64_t headerBytes = 0;
    std::memcpy(&headerBytes, bytes.data(), 8);  // open() succeeded: the file has the 8 bytes
    const uint64_t dataBytes = bytes.size() - 8 - headerBytes;
    for (const std::string& name : file->names()) {
        const TensorInfo& info = file->info(name);
        const std::string what = "tensor '" + name + "'";
        const uint64_t expected = mul(elementCount(info.shape, what), safetensorsDtypeBytes(info.dtype), what);
        if (info.end < info.begin || info.end - info.begin != expected)
            violated(what + ": data_offsets disagree with shape × dtype");
        if (info.end > dataBytes) violated(what + " ends past the data section");
        // npw info's headers-only reader reads the small biases' values from the mapping (in bounds).
        if (info.dtype == "F32" || info.dtype == "F16" || info.dtype == "BF16" || info.dtype == "F64")
            (void)file->anyNonZero(name);
        if (expected <= kLoadBytes) {
            try {
                const at::Tensor t = file->load(name);
                if (static_cast<uint64_t>(t.numel()) != elementCount(info.shape, what))
                    violated(what + ": the loaded tensor has another size");
            } catch (const Error&) {  // dtypes LibTorch 1.13 cannot hold
            }
        }
    }
    (void)file->metadata();
}

// ---- GGUF

void gguf(std::string_view bytes) {
    const std::string path = scratch().write("input.gguf", bytes);
    const GgufFile file = readGgufFile(path);
    if (file.fileSize != bytes.size()) violated("the file size is misread");
    nlohmann::json shown = nlohmann::json::object();
    for (const auto& [key, value] : file.metadata) {
        shown[key] = value.describe(16);  // as `npw info --json` prints it
        (void)shown.dump();               // throws on invalid UTF-8: keys must be checked when read
        shown.erase(key);
    }
    for (const GgufTensorInfo& t : file.tensors) {
        const std::string what = "tensor '" + t.name + "'";
        const uint64_t size = mul(elementCount(t.ne, what), static_cast<uint64_t>(ggmlTypeSize(t.type)), what);
        if (size != t.bytes()) violated(what + ": bytes() disagrees with ne × type size");
        if (add(add(file.dataOffset, t.offset, what), size, what) > file.fileSize)
            violated(what + " lies outside the file");
        if (size <= kLoadBytes && readGgufTensorBytes(file, t).size() != size) violated(what + ": read another size");
    }
}

// ---- PyTorch zip + pickle

void torchCheckpoint(std::string_view bytes) {
    if (!bytes.empty() && bytes[0] == 'P') {  // a raw pickle, through the unpickler alone
        auto document = unpickle(bytes.substr(1), "fuzz.pkl");
        (void)describePickleValue(document->root());
        return;
    }
    const std::string path = scratch().write("input.pt", bytes);
    auto checkpoint = TorchCheckpoint::open(path);
    for (const std::string& name : checkpoint->names()) {
        const TorchTensorInfo& info = checkpoint->info(name);
        const std::string what = "tensor '" + name + "'";
        if (info.shape.size() != info.stride.size()) violated(what + ": shape and stride differ in length");
        const uint64_t numel = elementCount(info.shape, what);
        if (info.storageOffset < 0 || info.storageNumel < 0) violated(what + ": a negative storage offset or size");
        if (numel > 0) {
            uint64_t last = static_cast<uint64_t>(info.storageOffset);
            for (size_t d = 0; d < info.shape.size(); ++d) {
                if (info.stride[d] < 0) violated(what + ": a negative stride was accepted");
                last = add(last, mul(static_cast<uint64_t>(info.shape[d] - 1), static_cast<uint64_t>(info.stride[d]), what), what);
            }
            if (last >= static_cast<uint64_t>(info.storageNumel)) violated(what + ": the view reaches past its storage");
        }
        if (numel <= kLoadBytes / 8) {
            const at::Tensor t = checkpoint->load(name);
            if (static_cast<uint64_t>(t.numel()) != numel) violated(what + ": the loaded tensor has another size");
            // Weights come only from floating-point storages: loadFloat refuses the others.
            const bool floating = info.dtype == "F32" || info.dtype == "F16" || info.dtype == "BF16" || info.dtype == "F64";
            if (!floating) {
                bool refused = false;
                try {
                    (void)checkpoint->loadFloat(name);
                } catch (const Error&) {
                    refused = true;
                }
                if (!refused) violated(what + ": loadFloat accepted the non-floating dtype " + info.dtype);
            }
        }
    }
    (void)checkpoint->summary();
}

// ---- tokenizer.json and the tokenizer files

// Text that reaches every step: spaces, digits, accents, CJK, emoji, a control character, and a
// long run of one letter before a mismatch (what catastrophic backtracking needs).
const std::string kText =
    "Hello  w\xc3\xb6rld 12345 \xef\xbc\xa1 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80\t\n x's <s> </s> "
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa! \xe2\x96\x81\xe2\x96\x81 end";

void checkIds(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
    for (int32_t id : ids)
        if (id < 0 || id >= tokenizer.vocabSize()) violated("encode gave id " + std::to_string(id) + " outside the vocabulary");
}

void tokenizerJson(std::string_view bytes) {
    auto tokenizer = Tokenizer::fromJson(std::string(bytes), "fuzz.json");
    const std::vector<int32_t> ids = tokenizer->encode(kText, true);
    checkIds(*tokenizer, ids);
    (void)tokenizer->decode(ids);
    std::vector<int32_t> all;
    for (int32_t id = 0; id < tokenizer->vocabSize() && id < 300; ++id) {
        all.push_back(id);
        (void)tokenizer->tokenText(id);
    }
    (void)tokenizer->decode(all);
}

template <class T>
void exerciseTokenizerFile(const T& tokenizer) {
    const std::vector<int32_t> ids = tokenizer.encode(kText, true);
    for (int32_t id : ids)
        if (id < 0 || id >= tokenizer.vocabSize()) violated("encode gave id " + std::to_string(id) + " outside the vocabulary");
    (void)tokenizer.decode(ids);
    std::vector<int32_t> all;
    for (int32_t id = 0; id < tokenizer.vocabSize() && id < 300; ++id) all.push_back(id);
    (void)tokenizer.decode(all);
}

// First byte: bit 0 SentencePiece tokenizer.model, else llama2.c tokenizer.bin (bit 1: read to
// its end, else exactly 1000 tokens).
void tokenizerFiles(std::string_view bytes) {
    if (bytes.empty()) return;
    const std::string file(bytes.substr(1));
    if (bytes[0] & 1)
        exerciseTokenizerFile(*SentencePieceTokenizer::fromBytes(file, "fuzz.model"));
    else
        exerciseTokenizerFile(*Llama2cTokenizer::fromBytes(file, "fuzz.bin", (bytes[0] & 2) ? -1 : 1000));
}

// ---- LLaMA-3's tiktoken tokenizer.model

// The file as it is. Only a file of exactly 128,000 ranks converts (what the conversion does
// after that is covered by tst_tokenizer's real LLaMA-3 vocabulary): under the fuzzer's length
// bound this reaches every line check (base64, ranks, duplicates, counts) and the refusals.
void tiktoken(std::string_view bytes) {
    const nlohmann::json converted = tiktokenAsTokenizerJson(bytes, "fuzz.model");
    auto tokenizer = Tokenizer::fromJson(json_fields::dumpJson(converted), "fuzz.model");
    checkIds(*tokenizer, tokenizer->encode(kText, true));
}

// ---- llama2.c tokenizer.bin, encoded and decoded

// The file (read to its end); what loads encodes the fixed text and a text made of its own
// pieces (so that merges happen), decodes those ids, every id alone and runs of byte-fallback
// ids, and the decoded text must always be writable as JSON (U+FFFD for a lone byte, never an
// exception: the `npw generate --json` contract).
void tokenizerBin(std::string_view bytes) {
    auto tokenizer = Llama2cTokenizer::fromBytes(bytes, "fuzz.bin", -1);
    const int32_t n = tokenizer->vocabSize();
    std::string ownText;
    // At most 2 KB: run.c's merge loop is quadratic in the text's length, by design.
    for (int32_t id = 0; id < n && id < 64 && ownText.size() < 2048; ++id) ownText += tokenizer->tokenText(id);
    if (ownText.size() > 2048) ownText.resize(2048);
    std::vector<int32_t> all;
    for (const std::string& text : {kText, ownText}) {
        const std::vector<int32_t> ids = tokenizer->encode(text, true, true);
        checkIds(*tokenizer, ids);
        all.insert(all.end(), ids.begin(), ids.end());
    }
    for (int32_t id = 0; id < n && id < 300; ++id) all.push_back(id);
    for (int32_t id = n - 1; id >= 0 && id >= n - 40; --id) all.push_back(id);
    const std::string decoded = tokenizer->decode(all);
    try {
        const std::string text = json_fields::dumpJson(nlohmann::json{{"text", decoded}, {"ids", all}});
        if (utf8::findInvalid(text) != std::string::npos) violated("the JSON text is not UTF-8");
    } catch (const Error& e) {
        violated(std::string("decoded text not writable as JSON: ") + e.what());
    }
}

// ---- the papers' data sets (wikitext2, ptb, ptb-flap, c4; raw, JSON lines, gzip)

// First byte: bits 0-1 the kind, bit 2 the use (calibration, else evaluation), bits 3-4 the file
// name's form (raw text, .jsonl, .json.gz, .txt.gz). The rest is the file (gzip is told from its
// magic, as the reader does; a .gz name holding no gzip is refused by name).
void textDataset(std::string_view bytes) {
    if (bytes.empty()) return;
    const auto selector = static_cast<unsigned char>(bytes[0]);
    static const TextDatasetKind kinds[] = {TextDatasetKind::WikiText2, TextDatasetKind::Ptb, TextDatasetKind::PtbFlap,
                                            TextDatasetKind::C4};
    static const char* const forms[] = {".raw", ".jsonl", ".json.gz", ".txt.gz"};
    const TextDatasetUse use = (selector & 4) ? TextDatasetUse::Calibration : TextDatasetUse::Evaluation;
    TextDatasetRef ref;
    ref.kind = kinds[selector & 3];
    ref.path = scratch().write(std::string("data-") + (use == TextDatasetUse::Calibration ? "train" : "test") +
                                   forms[(selector >> 3) & 3],
                               bytes.substr(1));
    const TextDataset data = readTextDataset(ref, use);
    for (size_t i = 0; i < data.rows.size(); ++i)
        if (utf8::findInvalid(data.rows[i]) != std::string::npos)
            violated("row " + std::to_string(i) + " is not UTF-8");
    // Bytes as ids: what tokenizing does to the text's size, without a tokenizer.
    const EncodeWithBos encode = [](const std::string& text) {
        std::vector<int32_t> ids{1};
        for (unsigned char c : text) ids.push_back(c);
        return ids;
    };
    if (use == TextDatasetUse::Evaluation) {
        const EvaluationCorpus corpus = evaluationCorpus(data, encode, 16);
        if (corpus.ids.empty() || corpus.ids[0] != 1) violated("the evaluation ids do not start with BOS");
    } else {
        const CalibrationCorpus corpus = calibrationCorpus(data, encode);
        if (corpus.stream.empty() && corpus.documents.empty()) violated("an accepted calibration set holds nothing");
    }
}

// ---- zero-shot task files

// First byte (mod 8) picks the task kind (boolq, piqa, hellaswag, winogrande, arc_easy,
// arc_challenge, openbookqa, mc); the rest is the JSONL file.
void zeroShot(std::string_view bytes) {
    if (bytes.empty()) return;
    static const char* const names[] = {"boolq", "piqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge",
                                        "openbookqa", "mc"};
    const std::string path = scratch().write("task.jsonl", bytes.substr(1));
    const ZeroShotTask task = loadZeroShotTask(names[static_cast<unsigned char>(bytes[0]) % 8], path);
    if (task.items.empty()) violated("a task with no items was accepted");
    for (size_t i = 0; i < task.items.size(); ++i) {
        const MultipleChoiceItem& item = task.items[i];
        const std::string what = "item " + std::to_string(i);
        const size_t n = item.choiceCount();
        if (n == 0) violated(what + ": no choices");
        if (item.gold < 0 || static_cast<size_t>(item.gold) >= n) violated(what + ": gold outside the choices");
        if (item.contexts.size() != 1 && item.contexts.size() != n) violated(what + ": contexts do not match the choices");
        if (item.continuations.size() != 1 && item.continuations.size() != n)
            violated(what + ": continuations do not match the choices");
        for (size_t c = 0; c < n; ++c)
            if (utf8::findInvalid(item.context(c) + item.continuation(c)) != std::string::npos)
                violated(what + ": a prompt is not UTF-8");
    }
}

// ---- export manifests (npw-manifest.json)

void manifest(std::string_view bytes) {
    const ExportManifestSummary summary = parseExportManifestSummary(bytes, "fuzz/npw-manifest.json");
    if (!(summary.ratio >= 0 && summary.ratio <= 1)) violated("a ratio outside [0, 1] was accepted");
    (void)json_fields::dumpJson(nlohmann::json{{"method", summary.method}});
}

// ---- workspace files (x.npw.json)

// What readWorkspace accepts is written back (writeWorkspace, without statistics) and must be
// read again: a workspace npw saved is one it reopens.
void workspace(std::string_view bytes) {
    const std::string path = scratch().write("input.npw.json", bytes);
    WorkspaceFile w = readWorkspace(path);
    w.statsCalibration.reset();  // no statistics file is written here
    const std::string again = scratch().folder("saved") + "/again.npw.json";
    writeWorkspace(again, w, nullptr);
    try {
        const WorkspaceFile reread = readWorkspace(again);
        if (reread.model != w.model || reread.scored.size() != w.scored.size() ||
            reread.sweepRows.size() != w.sweepRows.size())
            violated("the workspace written back reads differently");
    } catch (const Error& e) {
        violated(std::string("a workspace npw wrote from an accepted one is refused: ") + e.what());
    }
}

// ---- config files

const char* kValidLlamaConfig = R"({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
  "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 12})";

void checkConfig(const LlamaConfig& config, const std::string& source) {
    config.validate(source);
    // Everything npw computes from an accepted config must be computable.
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
        const auto i = static_cast<size_t>(layer);
        mul(static_cast<uint64_t>(config.num_heads[i]), static_cast<uint64_t>(config.head_dim), "q width");
        mul(static_cast<uint64_t>(config.intermediate_size[i]), static_cast<uint64_t>(config.hidden_size), "MLP");
    }
    (void)config.parameterCount(true, true);
}

// First byte (mod 5): 0 a Hugging Face LLaMA config.json, 1 an image classifier config, 2 an npw
// LlamaGen config.json, 3 an npw VQ config.json, 4 a model.safetensors.index.json beside a valid
// config.json. The rest is the file.
void configJson(std::string_view bytes) {
    if (bytes.empty()) return;
    const std::string text(bytes.substr(1));
    const std::string dir = scratch().folder("model");
    switch (static_cast<unsigned char>(bytes[0]) % 5) {
    case 0: {
        const std::string path = scratch().write("model/config.json", text);
        checkConfig(readHfLlamaConfig(path), path);
        break;
    }
    case 1: (void)ImageClassifierConfig::fromJson(text, "fuzz classifier config"); break;
    case 2:
        scratch().write("model/config.json", text);
        (void)loadLlamaGenCheckpoint(dir);  // the config is read before the (absent) weights
        break;
    case 3:
        scratch().write("model/config.json", text);
        (void)VqModel::load(dir);
        break;
    default:
        scratch().write("model/config.json", kValidLlamaConfig);
        scratch().write("model/model.safetensors.index.json", text);
        (void)loadHfLlamaDirectory(dir);
        break;
    }
}

// ---- llama2.c checkpoints

void llama2c(std::string_view bytes) {
    const std::string path = scratch().write("input.bin", bytes);
    const LlamaCheckpoint checkpoint = loadLlama2cCheckpoint(path);
    const LlamaConfig& c = checkpoint.config;
    checkConfig(c, path);
    if (checkpoint.weights.embed.size(0) != c.vocab_size || checkpoint.weights.embed.size(1) != c.hidden_size)
        violated("the embedding's shape disagrees with the config");
    if (static_cast<int64_t>(checkpoint.weights.layers.size()) != c.num_layers) violated("the layer count disagrees");
}

// ---- IDX

void idx(std::string_view bytes) {
    const std::string path = scratch().write("input.idx", bytes);
    const IdxArray array = readIdxFile(path);
    if (static_cast<uint64_t>(array.data.numel()) != elementCount(array.shape, "IDX data"))
        violated("the IDX data disagrees with its shape");
}

} // namespace

const std::vector<Target>& targets() {
    static const std::vector<Target> all = {
        {"safetensors", safetensors}, {"gguf", gguf},       {"torch_checkpoint", torchCheckpoint},
        {"tokenizer_json", tokenizerJson}, {"config_json", configJson}, {"llama2c", llama2c},
        {"idx", idx},                 {"tokenizer_files", tokenizerFiles},
        {"tiktoken", tiktoken},       {"tokenizer_bin", tokenizerBin}, {"text_dataset", textDataset},
        {"zeroshot", zeroShot},       {"manifest", manifest},      {"workspace", workspace},
    };
    return all;
}

const Target& target(const std::string& name) {
    for (const Target& t : targets())
        if (name == t.name) return t;
    throw std::invalid_argument("no fuzz target named '" + name + "'");
}

std::string check(const Target& target, std::string_view bytes, std::string* refusal) {
    if (refusal) refusal->clear();
    try {
        target.run(bytes);
    } catch (const Error& e) {  // a clear refusal: the contract holds
        if (refusal) *refusal = e.what();
    } catch (const Cancelled&) {
        return "npw::Cancelled escaped although nothing asked to cancel";
    } catch (const Violation& e) {
        return std::string("accepted but inconsistent: ") + e.what();
    } catch (const std::exception& e) {
        return std::string(typeid(e).name()) + " escaped instead of npw::Error: " + e.what();
    } catch (...) {
        return "an unknown exception escaped instead of npw::Error";
    }
    return "";
}

void initialize() {
    // libFuzzer stops at 2 GiB of RSS: npw's own allocation cap must refuse before that.
    ::setenv("NPW_MAX_ALLOCATION_BYTES", "1073741824", 0);
    at::set_num_threads(1);
    (void)scratch();
}

} // namespace npw::fuzz
