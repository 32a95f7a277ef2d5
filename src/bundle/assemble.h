// Writing a bundle: plugin files copied into DIR/plugins/<sha256 prefix>/<name> (identical files stored
// once, whichever targets share them) and the manifest, with each plugin's PJRT API and StableHLO
// versions read by loading it (never for TPU: libtpu contacts cloud metadata when it starts).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bundle/manifest.h"

namespace plugboard::bundle {

struct TargetSource {
  std::string name;
  std::filesystem::path file;        // the plugin to copy in
  std::optional<std::string> sha256;  // known already (fetched); computed otherwise
  std::string platform = "unknown";
  select::ProbeKind probe = select::ProbeKind::kNone;
  int priority = 0;
  std::vector<NamedValue> create_options;
  std::optional<Provenance> provenance;
};

// Creates or updates DIR: the targets given replace same-named ones already in its manifest.
Expected<Manifest> write_bundle(const std::filesystem::path& dir, const std::vector<TargetSource>& targets);

}  // namespace plugboard::bundle
