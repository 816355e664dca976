#pragma once
// The one writer of JSON text: every JSON npw writes (the CLI's --json output, manifests,
// config.json, workspaces, recipes, safetensors headers) is dumped here, so that no writer can
// forget either rule:
//  - text is valid UTF-8: a string holding bytes that are not UTF-8 (a decoded lone byte-fallback
//    piece, a file name) is written with U+FFFD for each invalid byte, never an exception
//    (nlohmann's default throws "invalid UTF-8 byte"); numbers and ids are written exactly;
//  - no non-finite number: nlohmann writes NaN and ±∞ as null, which reads as "not measured".
//    A result that became non-finite must have been refused where it was computed (requireFinite,
//    core/util/finite.h); one that reaches the writer is refused here, naming its field. A value
//    that is absent by design is written with json_fields::finiteOrNull, which makes it null first.
#include <nlohmann/json.hpp>

#include <string>

namespace npw::json_fields {

// `value` as JSON text (indent < 0: one line). Throws npw::Error naming the field when a number
// is NaN or ±∞ ("'ppl' of the JSON output is not finite (inf) ..."); `what` names the output in
// that message ("the JSON output", "workspace x.npw.json").
std::string dumpJson(const nlohmann::json& value, int indent = -1, const std::string& what = "the JSON output");

} // namespace npw::json_fields
