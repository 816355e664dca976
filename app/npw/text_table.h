#pragma once
// Plain-text tables whose columns are as wide as their content: every column as wide as its widest
// cell (in UTF-8 code points), two spaces between columns, numbers right-aligned, text left, no
// trailing spaces. So no two values ever touch however wide one gets (a perplexity of 10^9, a
// long method or data set name), and the columns stay aligned.
#include <string>
#include <vector>

namespace npw::cli {

struct TextTableColumn {
    std::string title;  // "" for an untitled tail (a note after the numbers)
    bool rightAligned = false;
};

// The header (when any column has a title) and the rows, one line each ending in '\n'. A row may
// have fewer cells than there are columns (the missing ones are empty).
std::string formatTextTable(const std::vector<TextTableColumn>& columns, const std::vector<std::vector<std::string>>& rows);

// The visible width of UTF-8 text: its code points ("ρ", "±" and "–" count one each).
size_t displayWidth(const std::string& text);

} // namespace npw::cli
