#include "app/npw/text_table.h"

#include <algorithm>

namespace npw::cli {

size_t displayWidth(const std::string& text) {
    return static_cast<size_t>(
        std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string formatTextTable(const std::vector<TextTableColumn>& columns, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::vector<std::string>> lines;
    const bool titled = std::any_of(columns.begin(), columns.end(), [](const TextTableColumn& c) { return !c.title.empty(); });
    if (titled) {
        std::vector<std::string> header;
        header.reserve(columns.size());
        for (const TextTableColumn& c : columns) header.push_back(c.title);
        lines.push_back(header);
    }
    lines.insert(lines.end(), rows.begin(), rows.end());
    std::vector<size_t> width(columns.size(), 0);
    for (const auto& line : lines)
        for (size_t i = 0; i < line.size() && i < columns.size(); ++i) width[i] = std::max(width[i], displayWidth(line[i]));
    std::string out;
    for (const auto& line : lines) {
        std::string text;
        for (size_t i = 0; i < columns.size(); ++i) {
            if (width[i] == 0) continue;  // a column empty in every row takes no room
            const std::string cell = i < line.size() ? line[i] : std::string();
            const std::string pad(width[i] - displayWidth(cell), ' ');
            if (!text.empty()) text += "  ";
            text += columns[i].rightAligned ? pad + cell : cell + pad;
        }
        while (!text.empty() && text.back() == ' ') text.pop_back();
        out += text + "\n";
    }
    return out;
}

} // namespace npw::cli
