#include "base/semver.h"

#include <charconv>

namespace plugboard {

std::optional<SemVer> parse_semver(std::string_view text) {
  int parts[3] = {0, 0, 0};
  int n = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (n < 3) {
    auto [next, ec] = std::from_chars(p, end, parts[n]);
    if (ec != std::errc() || parts[n] < 0) return std::nullopt;
    ++n;
    p = next;
    if (p == end) break;
    if (*p != '.') return std::nullopt;
    ++p;
  }
  if (p != end || n < 2) return std::nullopt;
  return SemVer{parts[0], parts[1], parts[2]};
}

}  // namespace plugboard
