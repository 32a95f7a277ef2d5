// A bundle: a folder holding several PJRT plugins and plugboard.json, the manifest that says, per target,
// which file serves it and what that file must be. The manifest is read strictly: every error names the
// field ("targets[1].file"), and a file must stay inside the bundle (no absolute path, no "..", no
// symlink leading out).
//
//   {"schema": 1, "targets": [{"name": "cpu", "platform": "cpu", "file": "plugins/1a2b…/xla_cpu_pjrt.so",
//     "size": 272629760, "sha256": "…", "pjrt_api": "0.81", "stablehlo": {"current": "1.11.0", …},
//     "provenance": {"package": "xla-cpu-pjrt", "version": "0.0.1", "wheel": "…", "wheel_sha256": "…",
//     "path_in_wheel": "…"}, "create_options": {}, "probe": "none", "priority": 10}]}
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "select/candidate.h"

namespace plugboard::bundle {

inline constexpr int kManifestSchema = 1;
inline constexpr const char* kManifestName = "plugboard.json";

struct Provenance {
  std::string package, version, wheel, wheel_sha256, path_in_wheel;
};

// A library a target needs besides its plugin (from a companion wheel such as nvidia-cuda-runtime-cu13),
// laid out in the bundle where the plugin's RUNPATH looks: plugins/<path in the wheel>.
struct CompanionFile {
  std::string file;  // relative to the bundle
  uint64_t size = 0;
  std::string sha256;
  std::string from;  // "nvidia-cuda-runtime-cu13==13.0.96 (wheel sha256 …)"
};

// A program compiled for the target when the bundle was made (plugboard bundle --precompile): a
// compile-cache entry (src/compile_cache/entry.h) at compiled/<target>/<key>.pbx, found at run time by
// its key and held to this size and sha256.
// "built_on" records what the key held about the machine that compiled it, readable, so that a boot on
// another processor can say why the entry does not load there (precompiled_host.h). Optional: bundles
// made before it have none.
struct BuiltOn {
  std::string cpu;         // the processor's model (compile_cache/host_cpu.h); empty for non-CPU targets
  std::string cpu_digest;  // what the key holds; empty for non-CPU targets
  std::string cpu_flags;   // its feature flags, space-separated
  std::string xla_flags;   // XLA_FLAGS when it was compiled
};

struct PrecompiledProgram {
  std::string program;  // what it was compiled from, the path as given ("priv/model.mlir")
  std::string file;     // relative to the bundle; its name is the entry's key + ".pbx"
  uint64_t size = 0;
  std::string sha256;
  std::optional<BuiltOn> built_on;
};

struct TargetEntry {
  std::string name;
  std::string platform;
  std::string file;  // relative to the bundle
  uint64_t size = 0;
  std::string sha256;
  std::optional<std::string> pjrt_api;  // "0.81"; unset when the plugin could not be loaded to ask
  std::optional<std::string> stablehlo_current, stablehlo_minimum;
  std::optional<Provenance> provenance;
  std::vector<NamedValue> create_options;
  select::ProbeKind probe = select::ProbeKind::kNone;
  int priority = 0;
  std::vector<CompanionFile> companions;
  std::vector<PrecompiledProgram> precompiled;
};

struct Manifest {
  int schema = kManifestSchema;
  std::vector<TargetEntry> targets;
};

// Reads DIR/plugboard.json and checks it, including that every file resolves inside DIR.
// A target name: letters, digits, '_', '.', '-'; a letter or digit first; at most 64 characters.
bool is_valid_target_name(std::string_view name);

Expected<Manifest> read_manifest(const std::filesystem::path& bundle_dir) noexcept;
Expected<Manifest> parse_manifest(const std::string& text, const std::filesystem::path& bundle_dir) noexcept;
Status write_manifest(const std::filesystem::path& bundle_dir, const Manifest& manifest);

// `relative` resolved inside `bundle_dir`, following symlinks; an error naming `field` otherwise.
Expected<std::filesystem::path> resolve_in_bundle(const std::filesystem::path& bundle_dir, const std::string& relative,
                                                  const std::string& field);

// The manifest's targets as selection candidates (source "bundle DIR").
std::vector<select::Candidate> bundle_candidates(const std::filesystem::path& bundle_dir, const Manifest& manifest);

}  // namespace plugboard::bundle
