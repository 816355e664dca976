#include "core/text/normalizer.h"

#include "core/text/json_fields.h"
#include "core/util/error.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

namespace npw {

struct Normalizer::Step {
    virtual ~Step() = default;
    virtual std::string apply(std::string text) const = 0;
};

namespace {

using json_fields::Json;

struct Prepend final : Normalizer::Step {
    std::string prefix;
    std::string apply(std::string text) const override { return text.empty() ? text : prefix + text; }
};

struct ReplaceLiteral final : Normalizer::Step {
    std::string from, to;
    std::string apply(std::string text) const override {
        if (from.empty())
            return text;
        std::string out;
        out.reserve(text.size());
        std::size_t start = 0;
        for (std::size_t hit; (hit = text.find(from, start)) != std::string::npos; start = hit + from.size())
            out.append(text, start, hit - start).append(to);
        return out.append(text, start, std::string::npos);
    }
};

struct UnicodeForm final : Normalizer::Step {
    const icu::Normalizer2* form = nullptr;
    std::string apply(std::string text) const override {
        std::string out;
        icu::StringByteSink<std::string> sink(&out);
        UErrorCode status = U_ZERO_ERROR;
        form->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr,
                            status);
        if (U_FAILURE(status))
            throw Error(std::string("Unicode normalization failed: ") + u_errorName(status));
        return out;
    }
};

const icu::Normalizer2* unicodeForm(const std::string& type) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* form = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                   : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                   : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                   : type == "NFKD" ? icu::Normalizer2::getNFKDInstance(status)
                                                    : nullptr;
    if (form && U_FAILURE(status))
        throw Error("ICU has no " + type + " data: " + u_errorName(status));
    return form;
}

void appendSteps(const Json& node, const std::string& path,
                 std::vector<std::shared_ptr<const Normalizer::Step>>& steps, int depth = 0) {
    if (node.is_null())
        return;
    const std::string type = json_fields::typeOf(node, path);
    if (type == "Sequence") {
        json_fields::forEachSequenceStep(node, "normalizers", path, depth, [&](const Json& step, const std::string& stepPath) {
            appendSteps(step, stepPath, steps, depth + 1);
        });
    } else if (type == "Prepend") {
        auto step = std::make_shared<Prepend>();
        step->prefix = json_fields::requiredString(node, "prepend", path);
        steps.push_back(step);
    } else if (type == "Replace") {
        auto step = std::make_shared<ReplaceLiteral>();
        step->from = json_fields::literalPattern(node, path);
        step->to = json_fields::requiredString(node, "content", path);
        steps.push_back(step);
    } else if (const icu::Normalizer2* form = unicodeForm(type)) {
        auto step = std::make_shared<UnicodeForm>();
        step->form = form;
        steps.push_back(step);
    } else {
        throw Error("normalizer type '" + type + "' at '" + path +
                    "' is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)");
    }
}

} // namespace

Normalizer Normalizer::fromJson(const nlohmann::json& node, const std::string& path) {
    Normalizer normalizer;
    appendSteps(node, path, normalizer.steps_);
    return normalizer;
}

std::string Normalizer::apply(std::string text) const {
    for (const auto& step : steps_)
        text = step->apply(std::move(text));
    return text;
}

} // namespace npw
