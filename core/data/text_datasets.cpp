#include "core/data/text_datasets.h"

#include "core/text/json_fields.h"
#include "core/text/utf8.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <zlib.h>

namespace npw {

namespace {

struct KindName {
    const char* name;
    TextDatasetKind kind;
};
// Longest first: "ptb-flap-test" must not read as ptb with split "flap-test".
const KindName kKinds[] = {{"wikitext2", TextDatasetKind::WikiText2},
                           {"ptb-flap", TextDatasetKind::PtbFlap},
                           {"ptb", TextDatasetKind::Ptb},
                           {"c4", TextDatasetKind::C4}};

DatasetSplit splitWord(const std::string& word) {
    if (word == "train") return DatasetSplit::Train;
    if (word == "test") return DatasetSplit::Test;
    if (word == "valid" || word == "validation" || word == "val" || word == "dev") return DatasetSplit::Validation;
    return DatasetSplit::Unknown;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Python's str.isspace() (what str.strip() removes): Unicode White_Space minus nothing that
// matters here, plus the information separators U+001C..U+001F that Python counts as well.
bool isPythonSpace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.strip() on valid UTF-8.
std::string pythonStrip(std::string_view s) {
    size_t begin = 0;
    while (begin < s.size()) {
        const size_t n = utf8::charLength(s, begin);
        if (n == 0 || !isPythonSpace(utf8::decodeAt(s, begin))) break;
        begin += n;
    }
    size_t end = s.size();
    while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        const size_t n = utf8::charLength(s, start);
        if (n == 0 || start + n != end || !isPythonSpace(utf8::decodeAt(s, start))) break;
        end = start;
    }
    return std::string(s.substr(begin, end - begin));
}

bool isBlank(std::string_view s) { return pythonStrip(s).empty(); }

std::string expectedForm(const TextDatasetRef& ref) {
    switch (ref.kind) {
    case TextDatasetKind::WikiText2:
        return "WikiText-2 raw text (wiki.train.raw / wiki.valid.raw / wiki.test.raw) or its rows as JSON lines with a "
               "\"text\" field (.jsonl/.json, optionally .gz)";
    case TextDatasetKind::Ptb:
    case TextDatasetKind::PtbFlap:
        return "Penn Treebank text (ptb.train.txt / ptb.valid.txt / ptb.test.txt) or its rows as JSON lines with a "
               "\"sentence\" field (.jsonl/.json, optionally .gz)";
    case TextDatasetKind::C4:
        return "C4 JSON lines with a \"text\" field, gzip'd as released (c4-train.00000-of-01024.json.gz, "
               "c4-validation.00000-of-00008.json.gz) or plain";
    }
    return "";
}

std::string splitHint(const TextDatasetRef& ref, TextDatasetUse use) {
    const std::string kind = textDatasetKindName(ref.kind);
    if (use == TextDatasetUse::Calibration) return kind + "-train:" + ref.path;
    return kind + (ref.kind == TextDatasetKind::C4 || ref.kind == TextDatasetKind::PtbFlap ? "-validation:" : "-test:") +
           ref.path;
}

// The file of the release that a folder holds for `use` (or for the stated split).
std::string releaseFileName(const TextDatasetRef& ref, TextDatasetUse use) {
    DatasetSplit split = ref.split;
    if (split == DatasetSplit::Unknown)
        split = use == TextDatasetUse::Calibration ? DatasetSplit::Train
                : ref.kind == TextDatasetKind::PtbFlap || ref.kind == TextDatasetKind::C4 ? DatasetSplit::Validation
                                                                                            : DatasetSplit::Test;
    const char* word = split == DatasetSplit::Train ? "train" : split == DatasetSplit::Test ? "test" : "valid";
    switch (ref.kind) {
    case TextDatasetKind::WikiText2: return std::string("wiki.") + word + ".raw";
    case TextDatasetKind::Ptb:
    case TextDatasetKind::PtbFlap: return std::string("ptb.") + word + ".txt";
    case TextDatasetKind::C4:
        return split == DatasetSplit::Train ? "c4-train.00000-of-01024.json.gz" : "c4-validation.00000-of-00008.json.gz";
    }
    return "";
}

bool startsWithGzipMagic(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    unsigned char magic[2] = {0, 0};
    in.read(reinterpret_cast<char*>(magic), 2);
    return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

std::string join(const std::vector<std::string>& rows, size_t count, const std::string& separator) {
    count = std::min(count, rows.size());
    size_t bytes = 0;
    for (size_t i = 0; i < count; ++i) bytes += rows[i].size() + separator.size();
    std::string out;
    out.reserve(bytes);
    for (size_t i = 0; i < count; ++i) {
        if (i) out += separator;
        out += rows[i];
    }
    return out;
}

} // namespace

const char* textDatasetKindName(TextDatasetKind kind) {
    for (const KindName& k : kKinds)
        if (k.kind == kind) return k.name;
    return "?";
}

const char* datasetSplitName(DatasetSplit split) {
    switch (split) {
    case DatasetSplit::Train: return "train";
    case DatasetSplit::Validation: return "validation";
    case DatasetSplit::Test: return "test";
    case DatasetSplit::Unknown: break;
    }
    return "unknown";
}

std::string textDatasetSyntax() {
    return "wikitext2:FILE, ptb:FILE, ptb-flap:FILE or c4:FILE (FILE or the release's folder; the split from the "
           "file name, or stated: NAME-train|test|validation:FILE)";
}

std::string textDatasetNames() { return "wikitext2, ptb, ptb-flap or c4"; }

std::string TextDatasetRef::label() const {
    std::string s = textDatasetKindName(kind);
    if (split != DatasetSplit::Unknown) s += std::string("-") + datasetSplitName(split);
    return s;
}

std::optional<TextDatasetRef> parseTextDatasetRef(const std::string& value) {
    const size_t colon = value.find(':');
    if (colon == std::string::npos) return std::nullopt;
    const std::string name = lower(value.substr(0, colon));
    for (const KindName& k : kKinds) {
        const std::string kind = k.name;
        if (name.compare(0, kind.size(), kind) != 0) continue;
        TextDatasetRef ref;
        ref.kind = k.kind;
        ref.path = value.substr(colon + 1);
        if (name.size() > kind.size()) {
            if (name[kind.size()] != '-') continue;  // e.g. "ptbx": not a data set
            const std::string split = name.substr(kind.size() + 1);
            ref.split = splitWord(split);
            if (ref.split == DatasetSplit::Unknown) {
                if (k.kind == TextDatasetKind::Ptb && split.rfind("flap", 0) == 0) continue;  // ptb-flap…
                throw Error("'" + value + "': '" + split + "' is not a split (train, test or validation): " +
                            textDatasetSyntax());
            }
        }
        if (ref.path.empty()) throw Error("'" + value + "' names no file: " + textDatasetSyntax());
        return ref;
    }
    return std::nullopt;
}

DatasetSplit splitFromFileName(const std::string& path) {
    const std::string name = lower(std::filesystem::path(path).filename().string());
    DatasetSplit found = DatasetSplit::Unknown;
    std::string word;
    auto take = [&] {
        const DatasetSplit s = splitWord(word);
        word.clear();
        if (s == DatasetSplit::Unknown) return true;
        if (found != DatasetSplit::Unknown && found != s) return false;  // two splits named: ambiguous
        found = s;
        return true;
    };
    for (char c : name) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            word.push_back(c);
        } else if (!take()) {
            return DatasetSplit::Unknown;
        }
    }
    return take() ? found : DatasetSplit::Unknown;
}

TextDataset readTextDataset(const TextDatasetRef& given, TextDatasetUse use) {
    TextDataset data;
    data.ref = given;
    TextDatasetRef& ref = data.ref;
    const std::string kind = textDatasetKindName(ref.kind);
    const std::string useName = use == TextDatasetUse::Calibration ? "calibration" : "evaluation";
    if (std::filesystem::is_directory(ref.path))  // the release's folder: its file for this use
        ref.path = (std::filesystem::path(ref.path) / releaseFileName(ref, use)).string();
    if (ref.split == DatasetSplit::Unknown) {
        ref.split = splitFromFileName(ref.path);
        if (ref.split == DatasetSplit::Unknown)
            throw Error("cannot tell which split '" + ref.path + "' is from its name (no single train, test or "
                        "valid[ation] in it): say " + splitHint(ref, use) + " (" + textDatasetSyntax() + ")");
    }
    const bool splitSuits = use == TextDatasetUse::Calibration ? ref.split == DatasetSplit::Train
                                                               : ref.split != DatasetSplit::Train;
    if (!splitSuits)
        throw Error("'" + ref.path + "' is " + kind + "'s " + datasetSplitName(ref.split) + " split; " + useName +
                    (use == TextDatasetUse::Calibration ? " draws from the train split"
                                                        : " scores a held-out split (test or validation)") +
                    ". Give that file, or say " + splitHint(ref, use) + " if this file is that split");

    const std::string fileKind = fileKindOf(ref.path);
    if (fileKind == "missing")
        throw Error(kind + " file '" + ref.path + "' does not exist; expected " + expectedForm(ref));
    if (fileKind != "a regular file")
        throw Error(kind + " file '" + ref.path + "' is " + fileKind + ", not a regular file; expected " + expectedForm(ref));
    std::string name = lower(std::filesystem::path(ref.path).filename().string());
    if (endsWith(name, ".gz")) {
        if (!startsWithGzipMagic(ref.path))
            throw Error("'" + ref.path + "' is named .gz but is not gzip data (it does not start with the bytes 1f 8b); "
                        "expected " + expectedForm(ref));
        name.resize(name.size() - 3);
    }
    data.jsonLines = ref.kind == TextDatasetKind::C4 || endsWith(name, ".jsonl") || endsWith(name, ".json");
    const char* field = ref.kind == TextDatasetKind::Ptb || ref.kind == TextDatasetKind::PtbFlap ? "sentence" : "text";
    // C4's evaluation joins its first documents only: the rest of the shard is never read.
    const size_t rowsNeeded = use == TextDatasetUse::Evaluation && ref.kind == TextDatasetKind::C4
                                  ? size_t(kC4EvalDocuments)
                                  : SIZE_MAX;
    const uint64_t budget = ref.kind == TextDatasetKind::C4 ? kMaxC4DatasetBytes : kMaxTextDatasetBytes;
    uint64_t kept = 0;  // the rows' bytes and bookkeeping
    bool seenText = false;
    int64_t lineNumber = 0;

    // One line, without its end (raw text: universal newlines, `ended` when a line end followed).
    const auto takeLine = [&](std::string_view line, uint64_t offset, bool ended) {
        ++lineNumber;
        const size_t bad = utf8::findInvalid(line);
        if (bad != std::string::npos)
            throw Error("'" + ref.path + "' is not UTF-8 text (an ill-formed byte sequence at offset " +
                        std::to_string(offset + bad) + "); expected " + expectedForm(ref));
        if (data.jsonLines) {
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (isBlank(line)) return;  // a blank line holds no row (the JSON-lines convention)
            const std::string where = "'" + ref.path + "' line " + std::to_string(lineNumber);
            json_fields::Json row;
            try {
                row = json_fields::parseJsonLimited(line, where);
            } catch (const Error& e) {
                throw Error(std::string(e.what()) + "; expected " + expectedForm(ref));
            }
            if (!row.is_object() || !row.contains(field) || !row[field].is_string())
                throw Error(where + ": expected a JSON object with a string field \"" + field + "\" (" +
                            expectedForm(ref) + "), got " + json_fields::preview(row));
            data.rows.push_back(row[field].get<std::string>());
        } else {
            // JSON lines under a raw-text name would become rows of JSON syntax: say so instead.
            if (!seenText) {
                const size_t first = line.find_first_not_of(" \t\r\n");
                if (first != std::string::npos) {
                    seenText = true;
                    if (line.compare(first, 2, "{\"") == 0)
                        throw Error("'" + ref.path + "' looks like JSON lines (it starts with '{\"') but its name does "
                                    "not end in .jsonl or .json (optionally .gz); rename it, or give " + expectedForm(ref));
                }
            }
            std::string row(line);
            if (ended) row.push_back('\n');
            if (ref.kind == TextDatasetKind::WikiText2)
                data.rows.push_back(isBlank(row) ? std::string() : std::move(row));  // HF's wikitext builder
            else
                data.rows.push_back(pythonStrip(row));  // HF's ptb_text_only builder
        }
        kept += data.rows.back().size() + sizeof(std::string);
        if (kept > budget)
            throw Error(kind + " file '" + ref.path + "': its first " + std::to_string(data.rows.size()) +
                        " rows already take more than " + std::to_string(budget >> 20) + " MiB; npw reads at most that "
                        "of a " + kind + " file (" + (ref.kind == TextDatasetKind::C4 ? "C4's train shard holds ~0.8 GB"
                                                                                      : "the release's files are 11 MB at most") +
                        "); expected " + expectedForm(ref));
    };

    // The file in chunks, through zlib (which reads plain files as they are): nothing is kept but
    // the rows, a file that inflates past the budget is refused there.
    gzFile gz = gzdopen(RegularFile::open(ref.path, kind + " file").release(), "rb");
    if (!gz) throw Error(kind + " file '" + ref.path + "': cannot start reading it (zlib)");
    struct CloseGz {
        gzFile file;
        ~CloseGz() { gzclose(file); }
    } closeGz{gz};
    gzbuffer(gz, 1 << 17);
    std::vector<char> chunk(size_t(1) << 20);
    std::string pending;         // the bytes of a line not yet ended
    uint64_t pendingOffset = 0;  // pending's first byte in the inflated stream
    size_t searched = 0;         // pending's bytes before this hold no line end
    uint64_t total = 0;
    bool atEnd = false;
    while (!atEnd && data.rows.size() < rowsNeeded) {
        const int n = gzread(gz, chunk.data(), static_cast<unsigned>(chunk.size()));
        if (n < 0) {
            int code = 0;
            const char* message = gzerror(gz, &code);
            throw Error("gzip file '" + ref.path + "' is corrupt: " + (message ? message : "zlib error") +
                        "; expected " + expectedForm(ref));
        }
        if (n == 0) {
            int code = 0;
            gzerror(gz, &code);
            if (code == Z_BUF_ERROR)
                throw Error("gzip file '" + ref.path + "' is truncated (the compressed stream ends early); expected " +
                            expectedForm(ref));
            atEnd = true;
        }
        const std::string_view bytes(chunk.data(), static_cast<size_t>(std::max(n, 0)));
        const size_t nul = bytes.find('\0');
        if (nul != std::string::npos)
            throw Error("'" + ref.path + "' is binary, not text (a NUL byte at offset " + std::to_string(total + nul) +
                        "); expected " + expectedForm(ref));
        total += bytes.size();
        if (total > budget)
            throw Error(kind + " file '" + ref.path + "' holds more than " + std::to_string(budget >> 20) +
                        " MiB of text (after gzip); npw reads at most that of a " + kind + " file (" +
                        (ref.kind == TextDatasetKind::C4 ? "C4's train shard holds ~0.8 GB" : "the release's files are 11 MB at most") +
                        "); expected " + expectedForm(ref));
        if (!gzdirect(gz) && total >= kGzipRatioCheckBytes) {
            const int64_t compressed = gzoffset(gz);
            if (compressed > 0 && total > kMaxGzipRatio * static_cast<uint64_t>(compressed))
                throw Error("gzip file '" + ref.path + "' inflates more than " + std::to_string(kMaxGzipRatio) + "-fold (" +
                            std::to_string(total) + " bytes from its first " + std::to_string(compressed) +
                            " compressed bytes): not text as the data sets hold it (3- to 5-fold); expected " +
                            expectedForm(ref));
        }
        pending.append(bytes);
        // Hand out the complete lines. Raw text ends a line at "\n", "\r\n" or a lone "\r" (Python's
        // universal newlines); JSON lines at "\n" (a "\r" before it is dropped by takeLine).
        // `searched`: where the last search stopped, so that a long line is scanned once, not once
        // per chunk.
        size_t start = 0;
        while (data.rows.size() < rowsNeeded) {
            const size_t from = std::max(start, searched);
            const size_t end = data.jsonLines ? pending.find('\n', from) : pending.find_first_of("\r\n", from);
            if (end == std::string::npos) {
                searched = pending.size();
                break;
            }
            size_t next = end + 1;
            if (pending[end] == '\r') {
                if (end + 1 == pending.size() && !atEnd) {  // is it "\r\n"? the next chunk tells
                    searched = end;
                    break;
                }
                if (end + 1 < pending.size() && pending[end + 1] == '\n') ++next;
            }
            takeLine(std::string_view(pending).substr(start, end - start), pendingOffset + start, true);
            start = next;
        }
        pending.erase(0, start);
        pendingOffset += start;
        searched = searched > start ? searched - start : 0;
    }
    if (!pending.empty() && data.rows.size() < rowsNeeded) takeLine(pending, pendingOffset, false);
    data.fileBytes = total;
    if (total == 0) throw Error(kind + " file '" + ref.path + "' is empty; expected " + expectedForm(ref));
    if (data.rows.empty()) throw Error(kind + " file '" + ref.path + "' holds no rows; expected " + expectedForm(ref));
    return data;
}

std::string preparedText(const TextDataset& data, TextDatasetUse use) {
    const size_t all = data.rows.size();
    if (use == TextDatasetUse::Calibration) {
        if (data.ref.kind == TextDatasetKind::C4)
            throw Error("C4's calibration draws documents one by one, not from one text (calibrationCorpus)");
        return join(data.rows, all, " ");
    }
    switch (data.ref.kind) {
    case TextDatasetKind::WikiText2: return join(data.rows, all, "\n\n");
    case TextDatasetKind::Ptb: return join(data.rows, all, " ");
    case TextDatasetKind::PtbFlap: return join(data.rows, all, "\n\n");
    case TextDatasetKind::C4: return join(data.rows, size_t(kC4EvalDocuments), " ");
    }
    return {};
}

EvaluationCorpus evaluationCorpus(const TextDataset& data, const EncodeWithBos& encode, int64_t seqlen) {
    if (seqlen <= 0) throw Error("evaluation: the window length must be positive, got " + std::to_string(seqlen));
    EvaluationCorpus corpus;
    const std::string text = preparedText(data, TextDatasetUse::Evaluation);
    corpus.textBytes = static_cast<int64_t>(text.size());
    corpus.rows = data.ref.kind == TextDatasetKind::C4 ? std::min<int64_t>(kC4EvalDocuments, int64_t(data.rows.size()))
                                                       : int64_t(data.rows.size());
    corpus.ids = encode(text);
    corpus.tokensBeforeCut = static_cast<int64_t>(corpus.ids.size());
    if (data.ref.kind == TextDatasetKind::C4 && corpus.tokensBeforeCut > kC4EvalWindows * seqlen)
        corpus.ids.resize(static_cast<size_t>(kC4EvalWindows * seqlen));  // GPTQ: input_ids[:, :256 * seqlen]
    return corpus;
}

CalibrationCorpus calibrationCorpus(TextDataset data, const EncodeWithBos& encode) {
    CalibrationCorpus corpus;
    corpus.source = data.ref.label() + ":" + data.ref.path;
    if (data.ref.kind == TextDatasetKind::C4)
        corpus.documents = std::move(data.rows);
    else
        corpus.stream = encode(preparedText(data, TextDatasetUse::Calibration));
    return corpus;
}

} // namespace npw
