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

// Lays the shared libraries of a companion wheel out in the bundle, at plugins/<path in the wheel> —
// where the CUDA and ROCm plugins' RUNPATH ($ORIGIN/../nvidia/cu13/lib, $ORIGIN/../_rocm_sdk_core/lib)
// looks from plugins/<hash>/ — hashed as they are extracted, and records them as the target's
// companions. `from` says where they came from ("nvidia-cuda-runtime-cu13==13.0.96 (wheel sha256 …)").
// Returns how many files were added.
Expected<size_t> add_companion_wheel(const std::filesystem::path& dir, const std::string& target,
                                     const std::filesystem::path& wheel, const std::string& from);

// Copies `file` into the folder of `target`'s plugin (where a plugin-side library such as plugboard's
// CUDA callback bridge is looked for) and records it as one of the target's companions, hashed.
Status add_companion_file(const std::filesystem::path& dir, const std::string& target,
                          const std::filesystem::path& file, const std::string& from);

}  // namespace plugboard::bundle
