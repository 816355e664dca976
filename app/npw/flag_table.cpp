// The table of flags (flag_table.h). Read it as a list: each `add` declares a flag and the
// commands that take it; a variant for a command that takes the flag with another default, help
// or bound follows its declaration directly.
#include "app/npw/flag_table.h"

#include "core/data/text_datasets.h"
#include "core/eval/generate.h"
#include "core/eval/image_generate.h"
#include "core/eval/perplexity.h"
#include "core/eval/zeroshot.h"
#include "core/models/gguf_export.h"
#include "core/experiments/image_runtime_bench.h"
#include "core/experiments/image_sweep.h"
#include "core/prune/baselines.h"
#include "core/prune/layerwise_prune.h"
#include "core/prune/method_registry.h"
#include "core/prune/pruner.h"
#include "core/experiments/runtime_bench.h"
#include "core/experiments/scale_bench.h"
#include "core/experiments/scale_projection.h"
#include "core/experiments/sweep.h"
#include "core/experiments/synthetic_checkpoint.h"
#include "core/text/bpe_trainer.h"
#include "core/train/classifier_trainer.h"
#include "core/train/lm_trainer.h"
#include "core/util/error.h"
#include "core/util/paths.h"

#include <filesystem>
#include <limits>
#include <sstream>

namespace npw::cli {

namespace {

// Bounds of the sizes a user gives. They refuse what cannot be meant (and would otherwise end in
// an allocation failure deep inside a run), not what is merely large.
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();  // caps such as --max-windows; seeds
constexpr int64_t kMaxSeqlen = int64_t(1) << 20;    // tokens per window (models cap it at their context)
constexpr int64_t kMaxTokens = int64_t(1) << 20;    // tokens to generate or to time
constexpr int64_t kMaxWindows = 1000000;            // calibration windows
constexpr int64_t kMaxImages = 1000000;             // images generated or scored
constexpr int64_t kMaxBatch = int64_t(1) << 16;     // items per forward pass
constexpr int64_t kMaxRepeats = 1000;               // repeats, seeds, splits
constexpr int64_t kMaxIterations = 1000000;         // Newton steps, epochs
constexpr int64_t kMaxVocabulary = int64_t(1) << 24;

std::string number(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

// Core's method names, from its one table of methods (core/prune/method_registry.h).
std::vector<std::string> pruneMethodNames() { return methodNames(MethodKind::PerUnit); }
std::vector<std::string> baselineMethodNames() { return methodNames(MethodKind::Baseline); }
// `npw sweep --methods`: every per-unit method and numerical's variants, as parseSweepMethod takes them.
std::vector<std::string> sweepMethodNames() {
    return methodNamesWhere([](const MethodInfo& m) { return m.kind != MethodKind::Baseline; });
}
// --compensation's auto: each method's own where it has one (the registry's), none else.
std::string autoCompensationText() {
    std::string out;
    for (const MethodInfo* m : methodsWhere([](const MethodInfo& m) {
             return m.kind == MethodKind::PerUnit && m.compensation != CompensationKind::None;
         }))
        out += compensationName(m->compensation) + " for " + m->name + ", ";
    return "auto (" + out + "none else)";
}
std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
std::string commaList(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}
// A list flag's default as it is typed: "1,4,16".
template <class T>
std::string listDefault(const std::vector<T>& values) {
    std::string out;
    for (const T& v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
    return out;
}
// "a, b or c": how a Choice's values read in help and errors.
std::string orList(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return out;
}

// A Choice that has no parser in core: one of `names`.
std::function<void(const std::string&)> oneOf(std::vector<std::string> names) {
    return [names = std::move(names)](const std::string& value) {
        for (const std::string& n : names)
            if (n == value) return;
        throw Error("'" + value + "'");
    };
}

class Table {
public:
    void add(const Flag& flag, std::vector<std::string> commands) { entries_.push_back({flag, std::move(commands)}); }
    std::vector<FlagEntry> take() { return std::move(entries_); }

private:
    std::vector<FlagEntry> entries_;
};

// Commands that load a model for inference take --device and --dtype (metrics: --device only).
const std::vector<std::string> kModelCommands = {"info", "eval", "generate", "compare", "bench", "prune", "sweep", "zeroshot", "demo"};
// Every command but demo prints one JSON object with --json.
const std::vector<std::string> kJsonCommands = {"info",     "eval",          "generate",  "compare",  "bench",
                                                "prune",    "sweep",         "zeroshot",         "make-verse-task",
                                                "export-gguf", "train-tokenizer", "train-lm",   "train-classifier",
                                                "metrics",  "train-vq",      "train-c2i", "tokenize"};

std::vector<std::string> plus(std::vector<std::string> commands, const std::string& more) {
    commands.push_back(more);
    return commands;
}

std::vector<FlagEntry> buildTable() {
    Table t;
    const PruneSettings prune;            // `npw prune`'s defaults are the engine's
    const SweepSpec sweep;                 // and `npw sweep`'s the sweep's
    const ImageSweepSpec imageSweep;
    const ImageSamplingOptions sampling;  // image models
    const SamplingOptions textSampling;   // language models
    const PerplexityOptions perplexity;
    const ZeroShotOptions zeroShot;
    const RuntimeBenchOptions runtimeBench;  // `npw bench`'s suites
    const ImageRuntimeBenchOptions imageRuntimeBench;
    const ScaleBenchOptions scaleBench;
    const GpuAssumptions gpu;

    // ---- Inputs -------------------------------------------------------------------------------
    const Flag text = Flag::text("text", "FILE", "UTF-8 text, tokenized once with BOS at the start").reads();
    t.add(text, {"eval"});
    t.add(text.described("one verse per line (the held-out New Testament)"), {"make-verse-task"});
    t.add(text.described("UTF-8 text file to tokenize (as a whole)"), {"tokenize"});
    t.add(Flag::text("string", "S", "the text to tokenize, given on the command line"), {"tokenize"});
    t.add(Flag::toggle("no-bos", "do not put BOS first (npw's eval and generate do, when the tokenizer has one)"), {"tokenize"});
    t.add(Flag::text("ids", "FILE", "whitespace-separated token ids, used exactly as given").reads(), {"eval"});
    t.add(Flag::text("dataset", "NAME:FILE", "a paper's evaluation text prepared as GPTQ does: " + textDatasetSyntax())
              .readsSpec(),
          {"eval"});
    t.add(Flag::text("prompt", "TEXT", "text to continue (BOS is prepended)"), {"generate"});
    t.add(Flag::text("prompt", "TEXT", "text every model continues (BOS is prepended)"), {"compare"});
    t.add(Flag::text("prompts", "FILE", "prompts, one per non-empty line (UTF-8)").reads(), {"compare"});
    t.add(Flag::text("prompt-ids", "IDS", "token ids to continue, e.g. \"1 461\" (no tokenizer needed)"), {"generate"});
    t.add(Flag::text("logits", "FILE",
                     "also write the prompt's logits, float32 [prompt tokens, vocab], as a NumPy .npy file (one "
                     "forward pass over the prompt; language models)")
              .writes(),
          {"generate"});
    t.add(Flag::text("task", "NAME:FILE,…", "tasks as JSONL files: " + zeroShotTaskKinds()).readsSpec(), {"zeroshot"});
    const Flag corpus = Flag::text("corpus", "FILE", "training text, one document per line").reads();
    t.add(corpus, {"train-tokenizer"});
    t.add(corpus.described("training text"), {"train-lm"});
    const Flag tokenizer = Flag::text("tokenizer", "FILE", "tokenizer.json to tokenize it with (copied into DIR)").reads();
    t.add(tokenizer, {"train-lm"});
    t.add(tokenizer.described("tokenizer to use instead of the model's own: tokenizer.json, tokenizer.model (SentencePiece, "
                              "or LLaMA-3's tiktoken file) or llama2.c's tokenizer.bin (prune copies it into DIR)"),
          {"info", "eval", "generate", "compare", "bench", "prune", "sweep", "zeroshot", "export-gguf", "tokenize"});
    t.add(Flag::toggle("allow-small-vocab", "accept a tokenizer that covers less than 90 % of the model's vocabulary "
                                            "(refused otherwise: usually another model's tokenizer)"),
          {"info", "eval", "generate", "compare", "bench", "prune", "sweep", "zeroshot"});
    t.add(Flag::text("data", "DIR", "folder of the Fashion-MNIST IDX files (default: Debian's, or $NPW_FASHION_MNIST)").reads(),
          {"train-classifier", "train-vq", "train-c2i"});
    t.add(Flag::text("generated", "DIR", "folder of generated images (PNG/JPEG/BMP, one size)").reads(), {"metrics"});
    t.add(Flag::text("images-idx", "FILE", "an IDX image file (.gz or plain) or fashion-mnist-train / fashion-mnist-test")
              .readsSpec(),
          {"metrics"});
    t.add(Flag::text("model", "MODEL", "generate the images with a class-conditional LlamaGen model first (e.g. demo:c2i)")
              .readsModel(),
          {"metrics"});

    // ---- Pruning settings (PruneSettings) ---------------------------------------------------------
    // The method names from core's table of methods (method_registry.h), never a list typed here: a
    // method core adds is offered and described without an edit of this table.
    const std::vector<std::string> methods = pruneMethodNames(), baselines = baselineMethodNames();
    t.add(Flag::choice("method", "M", orList(join(methods, baselines)),
                       [](const std::string& v) {
                           if (!parseBaselineMethod(v)) parsePruneMethod(v);
                       },
                       commaList(methods) + "; the baselines in their own structure: " +
                           commaList(baselines))
              .byDefault(methodName(prune.method))
              .reportedAs("method"),
          {"prune"});
    t.add(Flag::text("methods", "A,B", "comma-separated: " + commaList(join(sweepMethodNames(), baselines)) +
                                           " (numerical-z: the paper's cross-layer order; numerical-nocomp: no "
                                           "compensation; numerical-box: z constrained to [0,1])"),
          {"sweep"});
    const Flag ratio = Flag::real("ratio", "R", "pruning ratio rho in [0, 1)").atLeast(0).below(1);
    t.add(ratio.byDefault(number(prune.ratio)).reportedAs("ratio"), {"prune"});
    t.add(ratio.byDefault("0.3").described("pruning ratio of the demo's numerical and FLAP runs"), {"demo"});
    t.add(ratio.byDefault("0.2").described("projection: pruning ratio rho of every site"), {"bench"});
    const Flag ratios = ratio.asList("R1,R2").named("ratios").described("pruning ratios ρ in [0, 1)");
    t.add(ratios, {"sweep"});
    t.add(ratios.byDefault("0,0.1,0.2,0.3,0.5").described("ratios for --synthetic"), {"bench"});
    const Flag alpha = Flag::real("alpha", "A", "head/channel balance α (default: unit params / channel params = 4*D_h/3 "
                                                "MHA, (2g+2)*D_h/3 GQA)")
                           .above(0);
    t.add(alpha.reportedAs("alpha"), {"prune"});
    t.add(alpha, {"sweep"});
    const Flag alphaMode =
        Flag::choice("alpha-mode", "paper|budget", "paper or budget", [](const std::string& v) { parseAlphaMode(v); },
                     "paper: eq. 7 (alpha*unit scores with channel scores, rho of units); budget: FLAP's reading (rho "
                     "of parameters)")
            .byDefault(alphaModeName(prune.alphaMode));
    t.add(alphaMode.reportedAs("alpha_mode"), {"prune"});
    t.add(alphaMode, {"sweep"});
    const Flag lambda = Flag::real("lambda", "X", "absolute penalty lambda of the numerical score (G normalised per token; "
                                                  "default: relative, --lambda-rel)").above(0);
    t.add(lambda, {"prune"});
    t.add(lambda.asList("X1,X2").described("absolute λ of the numerical score (a list: the λ study; default: relative, "
                                           "--lambda-rel)"),
          {"sweep"});
    const Flag lambdaRel = Flag::real("lambda-rel", "R", "lambda relative to the model's own scale: lambda = R / median "
                                                         "over layers of c = 1^T A^-1 1")
                               .above(0);
    t.add(lambdaRel.byDefault(number(prune.lambdaRel)).reportedAs("lambda_rel"), {"prune"});
    t.add(lambdaRel.byDefault(number(sweep.lambdaRel)).described("numerical runs without --lambda: lambda = R / median c"),
          {"sweep"});
    t.add(Flag::choice("ranking", "lstar-rel|lstar|lstar-kl|z", "lstar-rel, lstar, lstar-kl or z",
                       [](const std::string& v) { parseCrossLayerRanking(v); },
                       "numerical: how units of different layers compete: each layer in its z-order, across layers by "
                       "Theorem 3's compensated error L* per parameter relative to the residual stream (lstar-rel) or "
                       "absolute (lstar), lstar-rel's curves scaled per site to the KL of pruning that site alone measured on the "
                       "calibration windows (lstar-kl), or z (the paper's eq. 7 on z itself)")
              .byDefault(crossLayerRankingName(prune.crossLayer))
              .reportedAs("cross_layer_ranking"),
          {"prune"});
    t.add(Flag::integer("iters", "T", 0, kMaxIterations, "0: closed form; T > 0: Algorithm 1 with T Newton steps")
              .byDefault(std::to_string(prune.iters)),
          {"prune"});
    t.add(Flag::real("z0", "Z", "Algorithm 1's starting point (every z_j = Z; with --iters)").byDefault(number(prune.z0)),
          {"prune"});
    t.add(Flag::toggle("box", "numerical: constrain z to [0,1]^D (active-set solve at this ratio and lambda)"), {"prune"});
    t.add(Flag::real("damp", "G", "Theorem 3 dampening gamma, relative to mean(diag 2G)").atLeast(0).byDefault(number(prune.damp)),
          {"prune"});
    t.add(Flag::toggle("no-compensation", "slice without compensating o_proj/down_proj"), {"prune"});
    t.add(Flag::choice("compensation", "KIND", "auto, theorem3, flap-bias (or bias) or none",
                       [](const std::string& v) { parseCompensation(v); },
                       autoCompensationText() + ", theorem3, flap-bias (also spelt bias), none")
              .byDefault(compensationSettingName(prune.compensation))
              .reportedAs("compensation"),
          {"prune"});
    t.add(Flag::choice("only", "attention|mlp", "attention or mlp", oneOf({"attention", "mlp"}),
                       "prune only attention units or only MLP channels"),
          {"prune"});
    t.add(Flag::text("protect", "LAYERS", "layers left intact, e.g. 0,1 or 0-2"), {"prune"});
    t.add(Flag::choice("unit", "KIND", "kv-group or query-slot", [](const std::string& v) { parseAttentionUnit(v); },
                       "GQA attention unit: kv-group (KV head + its query heads) or query-slot")
              .byDefault(attentionUnitName(prune.attentionUnit)),
          {"prune"});
    // ---- The baselines' own knobs (core/prune/baselines.h) ----------------------------------------
    t.add(Flag::choice("taylor", "KIND", "param_first, param_mix or vectorize", [](const std::string& v) { parseTaylorKind(v); },
                       "llm-pruner: first-order Taylor importance per group, param_first (sum of |w dL/dw|), param_mix "
                       "(with the Fisher second-order term) or vectorize")
              .byDefault(taylorKindName(BaselineOptions{}.taylor)),
          {"prune"});
    t.add(Flag::text("llm-pruner-layers", "A-B", "llm-pruner: the layers pruned, A to B inclusive (default: all but the "
                                                 "first ceil(L/8) and the last ceil(L/16))"),
          {"prune"});
    t.add(Flag::toggle("llm-pruner-global", "llm-pruner: rank every unit of the layer range by its importance across "
                                            "layers (LLM-Pruner's --global_pruning) instead of a uniform ratio per layer"),
          {"prune"});
    t.add(Flag::real("layer-ratio", "R", "llm-pruner: the per-layer ratio as given (LLM-Pruner's own knob) instead of the one "
                                         "that reaches --ratio").atLeast(0).below(1),
          {"prune"});
    t.add(Flag::toggle("standardised-global",
                       "labelled option: standardise any method's metric per layer and rank globally (FLAP's structure)"),
          {"prune"});

    // ---- Calibration ------------------------------------------------------------------------------
    t.add(Flag::text("calib", "FILE",
                     "calibration text (tokenized once with BOS), a data set NAME:FILE (" + textDatasetNames() +
                         ": its train split, prepared as GPTQ does), or token ids with --calib-ids; image models: generated")
              .readsSpec(),
          {"prune", "sweep"});
    t.add(Flag::toggle("calib-ids", "--calib holds whitespace-separated token ids"), {"prune", "sweep"});
    t.add(Flag::toggle("calib-per-line", "--calib holds token ids, one sample per line (e.g. sampled from BOS): each "
                                         "window is a line's first --seqlen tokens"),
          {"prune", "sweep"});
    const Flag nsamples = Flag::integer("nsamples", "N", 1, kMaxWindows, "calibration windows, drawn at seeded random offsets");
    t.add(nsamples.byDefault(std::to_string(kDefaultCalibrationSamples)).reportedAs("calibration.samples"), {"prune"});
    t.add(nsamples.byDefault(std::to_string(scaleBench.nsamples)).described("scale suite: calibration windows of every prune"), {"bench"});
    t.add(nsamples.asList("N1,N2")
              .byDefault(std::to_string(sweep.calibSamples.at(0)))
              .described("calibration samples (a list: the samples ablation)"),
          {"sweep"});
    // --seqlen, the window length: one protocol (core/eval/evaluation_protocol.h) for every command:
    //   eval   none given: 2048, capped at the model's context (EvaluationProtocol); at least 2 tokens,
    //          since a window scores its tokens after the first
    //   prune, sweep (calibration)  none given: the model's context, at most 2048; more than the
    //          context: capped at it, with a note (calibrationSeqlen); sweep takes a list: the
    //          sequence-length ablation
    const Flag seqlen = Flag::integer("seqlen", "L", 1, kMaxSeqlen, "tokens per window (default: the model's context, at most 2048)");
    t.add(seqlen.atLeast(2).described("window length (default 2048, capped at the model's context)"), {"eval"});
    t.add(seqlen.described("tokens per window (default: the model's context, at most 2048; a longer one is capped at "
                           "the context, with a note)")
              .reportedAs("calibration.seqlen"),
          {"prune"});
    t.add(seqlen.atLeast(2).byDefault(std::to_string(scaleBench.seqlen)).described("scale suite: tokens per calibration and evaluation window"),
          {"bench"});
    t.add(seqlen.asList("L1,L2")
              .described("calibration window length (default: the model's context, at most 2048; a list: the "
                         "sequence-length ablation)"),
          {"sweep"});

    // ---- Evaluation ---------------------------------------------------------------------------------
    t.add(Flag::text("eval", "SETS", "text:FILE, ids:FILE or a data set NAME:FILE (" + textDatasetNames() + "), comma-separated")
              .readsSpec(),
          {"sweep"});
    t.add(Flag::integer("eval-seqlen", "N", 2, kMaxSeqlen, "evaluation window length, capped at the model's context "
                                                          "(the papers' protocol, as npw eval)")
              .byDefault(std::to_string(sweep.evaluation.seqlen)),
          {"sweep"});
    // (declared here, beside sweep's: a name's declarations stand together)
    t.add(Flag::integer("eval-seqlen", "L", 1, kMaxSeqlen, "runtime suite: tokens per evaluation window")
              .byDefault(std::to_string(runtimeBench.evalSeqlen)),
          {"bench"});
    const Flag maxWindows = Flag::integer("max-windows", "K", 0, kNoLimit, "evaluate only the first K windows of each set (0 = all)");
    t.add(maxWindows.byDefault(std::to_string(perplexity.maxWindows)).described("score only the first K windows (0 = all)"),
          {"eval"});
    t.add(maxWindows.byDefault(std::to_string(sweep.evaluation.maxWindows)).described("the window cap: evaluate only the "
          "first K windows of each set (0 = all; every row records it)"), {"sweep"});
    t.add(maxWindows.byDefault("100"), {"demo"});
    const Flag reference = Flag::text("reference", "REF", "reference images or statistics of the image metrics: "
                                                          "fashion-mnist-test, fashion-mnist-train, a folder of images, an "
                                                          "IDX file, or statistics (.safetensors)")
                                .readsSpec();
    t.add(reference.valueNamed("MODEL").readsModel().described("also report KL(reference || model) per token"), {"eval"});
    t.add(reference.byDefault("fashion-mnist-test"), {"prune", "sweep", "metrics"});
    t.add(Flag::toggle("layerwise", "one decoder block at a time over every window, weights memory-mapped (chosen by "
                                    "itself when the model exceeds half of the RAM; eval: not with --reference; prune: "
                                    "statistics in a work folder beside --out, the export written layer by layer in the "
                                    "checkpoint's dtype, chosen when the model in float32 and its statistics exceed half the RAM)"),
          {"eval", "prune"});
    t.add(Flag::toggle("layerwise", "calibrate, score, write each pruned model and evaluate one decoder block at a time, "
                                    "weights memory-mapped, statistics and one pruned model at a time in a work folder "
                                    "beside --csv (else the temporary folder); chosen by npw prune's rule; refuses the "
                                    "baselines, numerical-lstar-kl, --speed and --zeroshot"),
          {"sweep"});
    t.add(Flag::toggle("layerwise", "scale suite: every prune takes the layer-wise road (else npw's rule decides, as "
                                    "npw prune does)"),
          {"bench"});
    t.add(Flag::text("zeroshot", "NAME:FILE,…", "also zero-shot accuracy on these tasks (see npw zeroshot)").readsSpec(), {"sweep"});
    const Flag limit = Flag::integer("limit", "N", 0, kNoLimit, "score only the first N items of each task (0 = all)");
    t.add(limit.byDefault(std::to_string(zeroShot.limit)), {"zeroshot"});
    t.add(limit.byDefault("0").described("use only the first N images (0 = all)"), {"metrics"});
    t.add(Flag::integer("zeroshot-limit", "N", 0, kNoLimit, "items per zero-shot task (0 = all)").byDefault(std::to_string(zeroShot.limit)),
          {"sweep"});
    t.add(Flag::toggle("speed", "also memory and generation speed of every model (a 'speed' row each: Figure 5)"), {"sweep"});
    t.add(Flag::integer("speed-tokens", "N", 1, kMaxTokens, "--speed: prompt tokens, and as many greedy decode tokens")
              .byDefault(std::to_string(sweep.speedPromptTokens)),
          {"sweep"});
    t.add(Flag::integer("speed-repeats", "R", 1, kMaxRepeats,
                        "--speed: timed runs per model after one warm-up; the median is reported with the slowest and "
                        "fastest run and the load average")
              .byDefault(std::to_string(sweep.speedRepeats)),
          {"sweep"});
    t.add(Flag::integer("seeds", "K", 1, kMaxRepeats, "seeds 0..K-1 (calibration windows; random scores)").byDefault("3"),
          {"sweep"});

    // ---- Text generation (SamplingOptions) ------------------------------------------------------------
    t.add(Flag::integer("tokens", "N", 1, kMaxTokens, "new tokens at most").byDefault(std::to_string(textSampling.maxNewTokens)),
          {"generate", "compare"});
    t.add(Flag::real("temperature", "T", "sampling temperature; 0 = greedy (default: 0 for text, 1 for images as in LlamaGen)")
              .atLeast(0),
          {"generate", "compare"});
    t.add(Flag::real("top-p", "P", "nucleus sampling mass").above(0).atMost(1).byDefault(number(textSampling.topP)),
          {"generate", "compare"});
    t.add(Flag::toggle("no-stop", "do not stop at the end-of-sequence token"), {"generate", "compare"});

    // ---- Image models (ImageSamplingOptions, LlamaGen checkpoints, image metrics) -----------------------
    t.add(Flag::integer("class", "K[,K...]", 0, kMaxVocabulary, "image models: class id(s) to generate (a row of --n samples each)")
              .asList("K[,K...]"),
          {"generate"});
    const Flag n = Flag::integer("n", "N", 1, kMaxImages, "image models: samples per class");
    t.add(n.byDefault("1"), {"generate"});
    t.add(n.byDefault("1000").described("--model: images to generate, classes in turn"), {"metrics"});
    t.add(n.byDefault("500").described("items"), {"make-verse-task"});
    t.add(Flag::real("cfg", "S", "image models: classifier-free guidance scale (> 1 guides; LlamaGen uses 1.65-4)")
              .above(0)
              .byDefault(number(sampling.cfgScale)),
          {"generate", "prune", "sweep", "metrics"});
    t.add(Flag::real("cfg", "S", "image-runtime suite: classifier-free guidance scale (LlamaGen's sample_c2i default)")
              .above(0)
              .byDefault(number(imageRuntimeBench.cfgScale)),
          {"bench"});
    t.add(Flag::integer("cfg-interval", "I", -1, kMaxTokens,
                        "image models: guide only decode steps 0..I (LlamaGen's cfg_interval; -1 = all)")
              .byDefault(std::to_string(sampling.cfgInterval)),
          {"generate"});
    t.add(Flag::integer("top-k", "K", 0, kMaxVocabulary, "image models: sample only the K most likely tokens (0 = all)")
              .byDefault(std::to_string(sampling.topK)),
          {"generate", "prune", "sweep", "metrics"});
    const Flag vq = Flag::text("vq", "FILE", "image models: the VQ tokenizer (LlamaGen .pt or npw directory; default MODEL/vq)")
                       .readsModel();
    t.add(vq, {"generate", "prune", "sweep", "metrics"});
    t.add(vq.valueNamed("DIR").described("the VQ tokenizer from train-vq (copied into DIR/vq)"), {"train-c2i"});
    t.add(Flag::text("gpt-model", "NAME", "size of a LlamaGen checkpoint that does not say it: B, L, XL, XXL or 3B"),
          {"info", "generate", "prune", "sweep", "metrics"});
    t.add(Flag::text("gpt-model", "NAME", "image-runtime suite: the random GPT's LlamaGen size (B, L, XL, XXL or 3B)")
              .byDefault(imageRuntimeBench.gptModel),
          {"bench"});
    t.add(Flag::integer("image-size", "PX", 1, 1 << 16, "image size of a LlamaGen checkpoint named with --gpt-model (256 or 384)")
              .byDefault("256"),
          {"info", "generate", "prune", "sweep", "metrics"});
    t.add(Flag::integer("per-class", "N", 1, kMaxImages,
                        "image models: calibration samples generated per class (--calib generated; the paper: 128)")
              .byDefault(std::to_string(imageSweep.calibPerClass)),
          {"prune", "sweep"});
    t.add(Flag::choice("metric", "NAME", "fid or none", oneOf({"fid", "all", "none"}),
                       "image models: fid (all five metrics of dense and pruned: FID, sFID, IS, precision, recall) or none")
              .byDefault("none"),
          {"prune", "sweep"});
    t.add(Flag::integer("samples", "N", 1, kMaxImages, "image models: images generated per model for --metric")
              .byDefault(std::to_string(imageSweep.evalSamples)),
          {"prune", "sweep"});
    t.add(Flag::integer("token-ppl", "N", 0, kMaxImages,
                        "image models: also the class-conditional token perplexity of the VQ codes of the first N "
                        "Fashion-MNIST test images (10000: all; 0: off)")
              .byDefault("0"),
          {"sweep"});
    t.add(Flag::toggle("token-ppl-only", "image models: only the token perplexity of --token-ppl (no images generated, no FID)"),
          {"sweep"});
    t.add(Flag::text("features", "NET", "feature network of the image metrics: demo (the bundled classifier), a classifier "
                                        "folder, or a TorchScript file")
              .readsModel()
              .byDefault("demo"),
          {"prune", "sweep", "metrics"});
    t.add(Flag::text("degrade", "HOW", "noise:SIGMA or blur:SIGMA applied to the images first (for sanity checks)").byDefault("none"),
          {"metrics"});
    t.add(Flag::integer("is-splits", "N", 1, kMaxRepeats, "Inception Score splits (mean and std over them)").byDefault("10"),
          {"metrics"});
    t.add(Flag::text("cache-dir", "DIR", "where reference statistics are cached (default $NPW_CACHE_DIR, ~/.cache/npw)").writes(),
          {"metrics"});
    t.add(Flag::toggle("no-cache", "compute the reference statistics afresh and do not store them"), {"metrics"});
    t.add(Flag::text("save-reference", "FILE", "also write the reference statistics to FILE (.safetensors)").writes(), {"metrics"});

    // ---- Batches and seeds ------------------------------------------------------------------------------
    const Flag batch = Flag::integer("batch", "N", 1, kMaxBatch, "image models: samples per forward pass");
    t.add(batch.byDefault(std::to_string(perplexity.batchWindows)).described("windows per forward pass"), {"eval"});
    t.add(batch.byDefault(std::to_string(sampling.batchSize)), {"generate"});
    t.add(batch.byDefault("64"), {"prune", "sweep"});
    t.add(batch.byDefault("250").described("images per feature-network batch"), {"metrics"});
    t.add(batch.byDefault(std::to_string(zeroShot.batchRows)).described("sequences per forward pass"), {"zeroshot"});
    t.add(batch.asList("N1,N2").byDefault(listDefault(imageRuntimeBench.batches)).described("image-runtime suite: images per forward pass (2 rows each with guidance)"),
          {"bench"});
    const Flag seed = Flag::integer("seed", "S", 0, kNoLimit, "seed of initialisation and data order").byDefault("1");
    t.add(seed.byDefault(std::to_string(prune.seed))
              .described("seed of the calibration offsets and of --method random")
              .reportedAs("calibration.seed"),
          {"prune"});
    t.add(seed.byDefault(std::to_string(textSampling.seed)).described("random seed (images: sample i uses seed + i)"),
          {"generate"});
    t.add(seed.byDefault(std::to_string(textSampling.seed)).described("sampling seed, the same for every model"),
          {"compare"});
    t.add(seed.byDefault(std::to_string(imageSweep.evalSampling.seed)).described("image models: evaluation sample i uses seed S + i (calibration: S + 1000000 + i)"),
          {"sweep"});
    t.add(seed.described("seed of --degrade noise; --model: sample i uses seed S + i"), {"metrics"});
    t.add(seed.byDefault(std::to_string(SyntheticCheckpointOptions{}.seed)).described("--write-synthetic, --write-synthetic-image and the scale suite: seed of the random weights (and of the scale suite's token ids)"), {"bench"});
    t.add(seed.described("seed of the verse order, distractors and gold positions"), {"make-verse-task"});
    t.add(seed, {"train-lm"});
    t.add(seed.byDefault(std::to_string(ClassifierTrainOptions{}.seed)), {"train-classifier"});
    t.add(seed.described("seed of initialisation, data order and class dropout"), {"train-vq", "train-c2i"});

    // ---- Speed benchmarks (`npw bench`) -----------------------------------------------------------------
    t.add(Flag::integer("prompt-tokens", "N", 1, kMaxTokens, "prompt length for the prefill figure")
              .byDefault(std::to_string(runtimeBench.promptTokens)),
          {"bench"});
    t.add(Flag::integer("decode-tokens", "N", 1, kMaxTokens, "tokens generated for the decode figure")
              .byDefault(std::to_string(runtimeBench.decodeTokens)),
          {"bench"});
    t.add(Flag::integer("repeats", "R", 1, kMaxRepeats, "timed runs (median reported) after one warm-up")
              .byDefault(std::to_string(runtimeBench.repeats)),
          {"bench"});
    t.add(Flag::choice("suite", "NAME", "pruning, calibration-memory, runtime, image-runtime, scale or projection",
                       oneOf({"pruning", "calibration-memory", "runtime", "image-runtime", "scale", "projection"}),
                       "pruning: solver timings, re-selection latency, prune time on the demos; calibration-memory: peak "
                       "memory of in-RAM vs layer-wise calibration of a --synthetic model (default 1b); runtime: npw's "
                       "decode/prefill/eval against run.c, llama.cpp, eager PyTorch, the read-bandwidth roofline and the "
                       "GEMM bound on a --synthetic model (default 110m); image-runtime: images/s of a random LlamaGen "
                       "GPT (--gpt-model), its 50 % pruned copy and demo:c2i at each --batch with guidance, against the "
                       "bandwidth and GEMM bounds; scale: a --synthetic checkpoint (default 1b; 7b, 8b) written, "
                       "pruned (numerical, FLAP), exported and evaluated layer by layer, each step in its own process "
                       "with its time, peak memory and disk; projection: the layer-wise road's stages, memory and disk at "
                       "--shapes and --calibrations, from the work each stage does and the efficiency of a measured "
                       "run (--from)"),
          {"bench"});
    t.add(Flag::text("from", "FILE", "projection: the output of a measured `npw prune --json` (its stage_bounds)").reads(),
          {"bench"});
    t.add(Flag::text("shapes", "A,B", "projection: shapes to project to (tiny, 110m, 1b, 7b, 8b, 13b, 70b)")
              .byDefault("7b,8b,13b,70b"),
          {"bench"});
    t.add(Flag::text("calibrations", "WxL,...", "projection: calibrations, WINDOWSxSEQLEN each")
              .byDefault("16x512,128x2048"),
          {"bench"});
    t.add(Flag::real("gpu-gemm32-tflops", "T", "projection: one GPU's GEMM rate for the forward (bf16 inputs, float32 "
                                               "accumulation; default 60 % of an H100 SXM's 989)")
              .above(0)
              .byDefault(number(gpu.gemm32 / 1e12)),
          {"bench"});
    t.add(Flag::real("gpu-gemm64-tflops", "T", "projection: one GPU's float64 GEMM rate for the Gram updates (default "
                                               "75 % of an H100 SXM's 67)")
              .above(0)
              .byDefault(number(gpu.gemm64 / 1e12)),
          {"bench"});
    t.add(Flag::integer("gpu-host-cores", "N", 1, 4096, "projection: the GPU machine's CPU cores, which run the solves")
              .byDefault(std::to_string(gpu.hostCores)),
          {"bench"});
    t.add(Flag::integer("threads", "N", 1, 1024, "runtime, image-runtime and scale suites: threads of every runtime they time")
              .byDefault(std::to_string(runtimeBench.threads)),
          {"bench"});
    t.add(Flag::integer("eval-windows", "N", 1, kMaxWindows, "runtime suite: windows of the evaluation figure")
              .byDefault(std::to_string(runtimeBench.evalWindows)),
          {"bench"});
    t.add(Flag::integer("layers", "N", 0, 100000,
                        "calibration-memory: only the first N layers of the synthetic model (0 = all)")
              .byDefault("0"),
          {"bench"});
    t.add(Flag::integer("calib-samples", "N", 1, kMaxWindows, "calibration-memory: calibration windows").byDefault("4"),
          {"bench"});
    t.add(Flag::integer("calib-seqlen", "L", 1, kMaxSeqlen, "calibration-memory: tokens per window").byDefault("128"),
          {"bench"});
    t.add(Flag::choice("mode", "in-ram|layerwise", "in-ram or layerwise", oneOf({"in-ram", "layerwise"}),
                       "calibration-memory: run one mode in this process (internal)"),
          {"bench"});
    t.add(Flag::text("synthetic", "SIZE", "110m, 1b or tiny: decode speed and memory of a random LLaMA pruned to each --ratios (with --suite: that suite's model)"),
          {"bench"});
    t.add(Flag::choice("write-synthetic", "SIZE", "7b, 8b, 1b, 110m or tiny",
                       oneOf({"7b", "8b", "1b", "110m", "tiny"}),
                       "write a random LLaMA of that shape to --out DIR (Hugging Face layout, bf16 shards, tensor by "
                       "tensor; 7b: Llama-2-7B's shape, 8b: Llama-3-8B's) and stop"),
          {"bench"});
    t.add(Flag::choice("write-synthetic-image", "SIZE", "B, L, XL, XXL, 3B or tiny",
                       [](const std::string& v) { syntheticLlamaGenConfig(v); },
                       "write a random LlamaGen class-conditional GPT of that size to --out DIR (an npw image-model "
                       "folder: config.json and one bf16 model.safetensors, tensor by tensor; 256 px, 16×16 tokens, "
                       "codebook 16384; no VQ tokenizer) and stop"),
          {"bench"});
    t.add(Flag::integer("num-classes", "N", 1, 1 << 20,
                        "--write-synthetic-image: classes of the class table (LlamaGen's ImageNet models: 1000; a "
                        "calibration generates --per-class samples of each)")
              .byDefault("1000"),
          {"bench"});
    t.add(Flag::integer("shard-mib", "N", 1, 1 << 20, "--write-synthetic: MiB per safetensors shard")
              .byDefault(std::to_string(SyntheticCheckpointOptions{}.shardBytes >> 20)),
          {"bench"});
    t.add(Flag::integer("shard-mib", "N", 1, 1 << 20,
                        "the layer-wise road's export: MiB per safetensors shard (whole layers; a rerun after an "
                        "interruption keeps the finished shards)")
              .byDefault(std::to_string(LayerwisePruneOptions{}.shardBytes >> 20)),
          {"prune"});
    t.add(Flag::toggle("llamacpp", "also time llama.cpp on the same weights (a GGUF in the checkpoint's dtype, see --llamacpp-dtype; Node + "
                       "tests/fixtures/llamacpp)"),
          {"bench"});
    t.add(Flag::choice("llamacpp-dtype", "f32|f16|bf16", "f32, f16 or bf16", [](const std::string& v) { parseGgufDtype(v); },
                       "--llamacpp: the GGUF's weight type (default: the checkpoint's own when every matrix is stored "
                       "bf16 or f16 — a 7B in f32 would not fit beside it in memory — f32 otherwise)"),
          {"bench"});
    t.add(Flag::integer("llamacpp-threads", "N", 1, 1024,
                        "llama.cpp's CPU threads (its workers spin: more threads than free cores is slower)")
              .byDefault("1"),
          {"bench"});

    // ---- The demo ---------------------------------------------------------------------------------------
    t.add(Flag::integer("image-samples", "N", 0, kMaxImages,
                        "demo:c2i: images generated per model for the metrics (0 = skip the image model)")
              .byDefault("1000"),
          {"demo"});

    // ---- Training -----------------------------------------------------------------------------------------
    t.add(Flag::integer("vocab", "N", 1, kMaxVocabulary, "vocabulary size (3 specials + 256 bytes + merges)")
              .byDefault(std::to_string(BpeTrainOptions{}.vocabSize)),
          {"train-tokenizer"});
    t.add(Flag::choice("preset", "NAME", "lm or lm-gqa", oneOf({"lm", "lm-gqa"}),
                       "architecture: lm (multi-head) or lm-gqa (grouped-query)")
              .byDefault("lm"),
          {"train-lm"});
    t.add(Flag::integer("steps", "N", 1, kNoLimit, "total optimizer steps (default: the preset's recipe)"), {"train-lm"});
    const Flag epochs = Flag::integer("epochs", "E", 1, kMaxIterations, "passes over the 60 000 training images");
    t.add(epochs.byDefault(std::to_string(ClassifierTrainOptions{}.epochs)), {"train-classifier"});
    t.add(epochs.described("passes over the 60 000 training images (default: the demo recipe)"), {"train-vq", "train-c2i"});
    t.add(Flag::real("max-minutes", "M", "stop (after a checkpoint) after M minutes; 0 = run to the end")
              .atLeast(0)
              .byDefault(number(LmTrainOptions{}.maxSeconds / 60)),
          {"train-lm", "train-classifier", "train-vq", "train-c2i"});
    const Flag work = Flag::text("work", "DIR", "checkpoint folder (default DIR.train)").writes();
    t.add(work, {"train-lm", "train-classifier", "train-vq"});
    t.add(work.described("checkpoint folder, also caching the training codes (default DIR.train)"), {"train-c2i"});

    // ---- Outputs --------------------------------------------------------------------------------------------
    const Flag out = Flag::text("out", "DIR", "output directory (Hugging Face layout + npw-manifest.json)").writes();
    t.add(out.reportedAs("out"), {"prune"});
    t.add(out.valueNamed("FILE.png").described("image models: the PNG to write (one image, or a labelled grid)"), {"generate"});
    t.add(out.valueNamed("FILE").described("the .gguf file to write (atomically)"), {"export-gguf"});
    t.add(out.valueNamed("FILE").described("the task file to write (JSONL, kind mc)"), {"make-verse-task"});
    t.add(out.valueNamed("FILE").described("where to write tokenizer.json"), {"train-tokenizer"});
    t.add(out.described("model directory written when training finishes"), {"train-lm"});
    t.add(out.described("--write-synthetic, --write-synthetic-image: the model folder to create (must not exist); scale suite: the folder it "
                        "works in (created, must not exist, removed at the end; default ./npw-scale-SIZE)"),
          {"bench"});
    t.add(out.described("model folder written when training finishes (config.json, model.safetensors)"), {"train-classifier"});
    t.add(out.described("VQ folder written when training finishes (config.json, model.safetensors)"), {"train-vq"});
    t.add(out.described("model folder written when training finishes (LlamaGen keys + config.json)"), {"train-c2i"});
    t.add(out.byDefault("npw-demo-results").described("folder for results.json, the CSV and the pruned models"), {"demo"});
    t.add(Flag::text("name", "TEXT", "general.name (default: the model's folder or file name)"), {"export-gguf"});
    t.add(Flag::toggle("no-tokenizer", "write no tokenizer: a placeholder token per id, for running the model on token "
                                       "ids only (for a model without a tokenizer)"),
          {"export-gguf"});
    t.add(Flag::text("save-scores", "FILE", "also write the scores (safetensors)").writes(), {"prune"});
    t.add(Flag::text("save-stats", "FILE", "also write the calibration statistics (safetensors, raw sums)").writes(), {"prune"});
    t.add(Flag::text("stats", "FILE", "reuse statistics written by --save-stats or --stats-on-disk instead of calibrating "
                                      "(same model; memory-mapped)")
              .reads(),
          {"prune"});
    t.add(Flag::text("stats-on-disk", "FILE", "calibrate layer by layer, statistics written to FILE and memory-mapped, not "
                                              "held in RAM (automatic, with a temporary file, when they exceed half the RAM)")
              .writes(),
          {"prune"});
    t.add(Flag::choice("stats-precision", "auto|float64|float32", "auto, float64 or float32",
                       oneOf({"auto", "float64", "float32"}),
                       "the layer-wise scratch file's Gram triangles (auto: float64 when they fit in the checkpoint's "
                       "size plus the hidden states, else float32)")
              .byDefault("auto"),
          {"prune"});
    t.add(Flag::text("csv", "FILE", "also write every row as CSV (language models: each finished model's rows are "
                                    "kept in a work folder beside it until the CSV is written, so that the same command "
                                    "again resumes)")
              .writes(),
          {"sweep"});

    // ---- Runtime and output format ----------------------------------------------------------------------------
    t.add(Flag::text("device", "DEV", "auto, cpu, cuda or cuda:N (auto: CUDA when available)").byDefault("auto"),
          plus(kModelCommands, "metrics"));
    const Flag dtype =
        Flag::text("dtype", "TYPE", "auto, float32, float16, bfloat16 (auto: bfloat16 on CUDA, float32 on CPU)").byDefault("auto");
    t.add(dtype, kModelCommands);
    t.add(Flag::choice("dtype", "TYPE", "f32, f16 or bf16", [](const std::string& v) { parseGgufDtype(v); },
                       "f32, f16 or bf16 for the weight matrices (norms and biases stay f32)")
              .byDefault("f32"),
          {"export-gguf"});
    t.add(Flag::real("rope-scaling-factor", "F",
                     "the factor of a Meta checkpoint's use_scaled_rope, which params.json does not carry (8 for "
                     "Llama 3.1/3.3, 32 for 3.2 1B/3B; default: $NPW_ROPE_SCALING_FACTOR)")
              .above(0),
          plus(kModelCommands, "export-gguf"));
    t.add(Flag::toggle("json", "print one JSON object on stdout"), kJsonCommands);
    return t.take();
}

} // namespace

const std::vector<FlagEntry>& flagTable() {
    static const std::vector<FlagEntry> table = buildTable();
    return table;
}

std::vector<Flag> flagsFor(const std::string& command) {
    std::vector<Flag> flags;
    for (const FlagEntry& e : flagTable())
        for (const std::string& c : e.commands)
            if (c == command) flags.push_back(e.flag);
    return flags;
}

} // namespace npw::cli
