#pragma once
// A result that became NaN or ±∞ (a perplexity, a KL divergence, an accuracy, a score) is an
// error naming what became non-finite and where, never a null in the JSON with exit 0: nlohmann
// writes a non-finite double as null, which reads like "not measured". Results are checked where
// they are computed (requireFinite), and the JSON writer refuses what slips through
// (json_fields::dumpJson).
#include <string>

namespace npw {

// "NaN", "inf" or "-inf" (or "finite").
const char* nonFiniteName(double value);

// Throws npw::Error "<what> became non-finite (inf)<hint>" unless `value` is finite. `what` says
// what and where: "the perplexity of window 2", "layer 3's score of head 1".
void requireFinite(double value, const std::string& what, const std::string& hint = "");

// The hint every model-level non-finite result gives: what usually causes it.
extern const char* const kNonFiniteHint;

} // namespace npw
