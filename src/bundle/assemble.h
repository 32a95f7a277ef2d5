// Writing a bundle: plugin files copied into DIR/plugins/<sha256 prefix>/<name> (identical files stored
// once, whichever targets share them) and the manifest, with each plugin's PJRT API and StableHLO
// versions read by loading it (never for TPU: libtpu contacts cloud metadata when it starts).
//
// All or nothing: everything given is checked before the bundle is touched (target names, duplicate
// names, create options, each plugin file a regular ELF shared library exporting GetPjrtApi, companion
// wheels and files, and the resulting manifest as the manifest reader will read it); the files are
// then staged, put in place, and the manifest replaced last. A failure of any check leaves an existing
// bundle as it was. A failure while writing (a full disk) leaves the manifest and its plugin files as
// they were (plugins go to new content-addressed paths); companion libraries live at fixed paths (where
// the plugins' RUNPATH looks), so one replaced by different bytes before the failure no longer matches
// the old manifest: boot refuses it by hash, naming it, and the same bundle command run again repairs it. The bundle is locked (DIR/.bundle.lock) while it is assembled, so two runs on one folder, in
// threads or processes, take turns and neither loses the other's targets.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bundle/manifest.h"

namespace plugboard::bundle {

inline constexpr const char* kBundleLockName = ".bundle.lock";

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

// The shared libraries of a companion wheel, laid out in the bundle at plugins/<path in the wheel> —
// where the CUDA and ROCm plugins' RUNPATH ($ORIGIN/../nvidia/cu13/lib, $ORIGIN/../_rocm_sdk_core/lib)
// looks from plugins/<hash>/ — and recorded as the target's companions. `from` says where they came
// from ("nvidia-cuda-runtime-cu13==13.0.96 (wheel sha256 …)").
struct CompanionWheelSource {
  std::string target;
  std::filesystem::path wheel;
  std::string from;
};

// A file copied into the folder of a target's plugin (where a plugin-side library such as plugboard's
// CUDA callback bridge is looked for), recorded as a companion. With `platform` set instead of
// `target`, it goes with every target of that platform in the resulting bundle.
struct CompanionFileSource {
  std::string target;
  std::string platform;
  std::filesystem::path file;
  std::string from;
};

struct BundlePlan {
  std::vector<TargetSource> targets;  // replace same-named targets already in the bundle
  std::vector<CompanionWheelSource> companion_wheels;
  std::vector<CompanionFileSource> companion_files;
};

struct Assembled {
  Manifest manifest;                        // as written
  std::vector<size_t> companion_wheel_files;  // libraries added, per companion wheel of the plan
  std::vector<std::string> companion_file_targets;  // per companion file: the targets it went with
};

// Creates or updates DIR as a whole (see above).
Expected<Assembled> assemble_bundle(const std::filesystem::path& dir, const BundlePlan& plan) noexcept;

// The same, for one kind of change at a time.
Expected<Manifest> write_bundle(const std::filesystem::path& dir, const std::vector<TargetSource>& targets);
// Returns how many files were added.
Expected<size_t> add_companion_wheel(const std::filesystem::path& dir, const std::string& target,
                                     const std::filesystem::path& wheel, const std::string& from);
Status add_companion_file(const std::filesystem::path& dir, const std::string& target,
                          const std::filesystem::path& file, const std::string& from);

}  // namespace plugboard::bundle
