// Dotted versions ("1.13.3"), as plugins report StableHLO versions and programs carry them.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace plugboard {

struct SemVer {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const SemVer&) const = default;
  std::string to_string() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
};

// "1.13.3" (or "1.13"); nullopt for anything else.
std::optional<SemVer> parse_semver(std::string_view text);

}  // namespace plugboard
