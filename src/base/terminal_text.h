// Text from sources plugboard does not trust (manifests, environment variables, plugin attributes and
// error messages, an isolation child's answer) made safe to print on a terminal or in a log.
//
// A terminal obeys the control characters it is sent: ESC starts a sequence that can move the cursor,
// rewrite the title or clear the screen, and a NUL cuts the text for every C string API. terminal_safe
// spells every such byte out instead: C0 controls and DEL as \n, \t, \r, \e or \xNN; the C1 controls
// (U+0080..U+009F, which some terminals obey as CSI and kin) as \u0080..\u009f; bytes that are not UTF-8
// as \xNN. Everything else, printable UTF-8 included, passes unchanged.
#pragma once

#include <string>
#include <string_view>

namespace plugboard {

enum class Newlines { kEscape, kKeep };

// `newlines` kKeep leaves '\n' as it is (a report's own line structure); kEscape spells it out too (one
// untrusted value per line: a name, a reason).
std::string terminal_safe(std::string_view text, Newlines newlines = Newlines::kEscape);

}  // namespace plugboard
