#include "core/io/export_manifest.h"

#include "core/text/json_fields.h"
#include "core/util/atomic_file.h"
#include "core/util/error.h"

namespace npw {

ExportManifestSummary parseExportManifestSummary(std::string_view text, const std::string& source) {
    const nlohmann::json j = json_fields::parseJsonLimited(text, "export manifest '" + source + "'");
    try {
        if (!j.is_object()) throw Error("expected a JSON object");
        ExportManifestSummary s;
        s.method = json_fields::requiredString(j, "method", "");
        s.ratio = json_fields::requiredNumber(j, "ratio", "");
        if (!(s.ratio >= 0 && s.ratio <= 1))
            throw Error("field 'ratio': expected a pruning ratio in [0, 1], got " + json_fields::preview(j.at("ratio")));
        return s;
    } catch (const Error& e) {
        throw Error("export manifest '" + source + "': " + e.what());
    }
}

ExportManifestSummary readExportManifestSummary(const std::string& path) {
    return parseExportManifestSummary(readTextFile(path), path);
}

} // namespace npw
