#pragma once
// Which program is speaking: the command line or the studio. Core's messages tell a user how to
// fix what they refuse, and the remedy differs: `--tokenizer FILE` means nothing to someone in
// the studio, which takes no flags. The process's front end is set once, at start (the studio's
// main); everything else is the command line. Header-only: the loaders that word the messages
// and npw-text link nothing new.
#include <atomic>

namespace npw {

enum class FrontEnd { CommandLine, Studio };

inline std::atomic<FrontEnd>& frontEndSetting() {
    static std::atomic<FrontEnd> setting{FrontEnd::CommandLine};
    return setting;
}
inline void setFrontEnd(FrontEnd frontEnd) { frontEndSetting().store(frontEnd); }
inline FrontEnd frontEnd() { return frontEndSetting().load(); }

} // namespace npw
