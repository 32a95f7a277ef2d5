// The one folder plugboard keeps its caches under: $XDG_CACHE_HOME/plugboard (an absolute
// XDG_CACHE_HOME only), else ~/.cache/plugboard, else <tmp>/plugboard-cache-<uid> (never a folder
// every user shares). Read with secure_getenv: a setuid process does not take its cache from the
// caller's environment.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/environment.h"

namespace plugboard {

inline std::filesystem::path plugboard_cache_home() {
  const auto xdg = environment_override("XDG_CACHE_HOME");
  if (xdg && xdg->front() == '/') return std::filesystem::path(*xdg) / "plugboard";
  if (const auto home = environment_override("HOME")) return std::filesystem::path(*home) / ".cache" / "plugboard";
  std::error_code ec;
  return std::filesystem::temp_directory_path(ec) / ("plugboard-cache-" + std::to_string(::geteuid()));
}

}  // namespace plugboard
