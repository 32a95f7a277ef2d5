// Environment overrides (PLUGBOARD_*, PJRT_NAMES_AND_LIBRARY_PATHS, XDG_CACHE_HOME, ...), read the way
// the Vulkan loader reads its own: with secure_getenv, so that a setuid or setgid process (where the
// environment belongs to a less trusted user) sees none of them.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace plugboard {

// The variable's value; nullopt when it is unset, empty, or the process runs setuid/setgid.
inline std::optional<std::string> environment_override(const char* name) {
  const char* v = ::secure_getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace plugboard
