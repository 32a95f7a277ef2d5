// Where candidates come from, in this order: an explicit bundle; PLUGBOARD_PLUGIN_PATH (':'-separated
// folders of plugins or of bundles, and plugin files: a file that is not a PJRT plugin, an ELF shared
// library exporting GetPjrtApi, is refused with a note naming it); JAX's PJRT_NAMES_AND_LIBRARY_PATHS ("name:path,name:path");
// and, when asked, JAX/XLA plugin packages installed in Python environments (site-packages/jax_plugins/*,
// site-packages/xla_plugins/*).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "select/candidate.h"

namespace plugboard::bundle {

struct DiscoveryOptions {
  std::optional<std::filesystem::path> bundle;  // a bad explicit bundle is an error
  bool environment = true;                      // PLUGBOARD_PLUGIN_PATH and PJRT_NAMES_AND_LIBRARY_PATHS
  std::vector<std::filesystem::path> site_packages;  // folders to look in for jax_plugins/ and xla_plugins/
};

struct Discovery {
  std::vector<select::Candidate> candidates;
  std::vector<std::string> notes;  // what was looked at and skipped, for the report
};

Expected<Discovery> discover(const DiscoveryOptions& options) noexcept;

// Parsers for the two variables (exposed for tests).
std::vector<select::Candidate> candidates_from_plugin_path(const std::string& value, std::vector<std::string>& notes);
std::vector<select::Candidate> candidates_from_jax_names(const std::string& value, std::vector<std::string>& notes);
std::vector<select::Candidate> candidates_from_site_packages(const std::filesystem::path& site, std::vector<std::string>& notes);

// What a plugin name or file says about its platform (the name patterns of platforms/registry.h):
// "cuda13" → cuda, with the platform's probe and priority; "rocm7" → rocm; none → "unknown".
void guess_platform(select::Candidate& c);

}  // namespace plugboard::bundle
