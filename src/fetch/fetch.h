// Fetching PJRT plugins from their real distribution: PyPI wheels, obtained through pip.
//
//   pip download --no-deps  ->  wheel (checked against plugboard.lock)  ->  plugin extracted (fetch/zip_archive.h)
//   into a content-addressed cache: <cache>/plugins/<sha256>/<file name>
//
// Which file inside a wheel is the plugin, and which platform it serves, comes from the table of known
// packages (src/fetch/known_packages.json, embedded at build time); a package not in the table is
// inspected: the .so files in the wheel that export GetPjrtApi.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace plugboard::fetch {

// "xla-cpu-pjrt==0.0.1". Names are compared after PEP 503 normalization (case, '-', '_', '.').
struct PackageSpec {
  std::string name;     // as written
  std::string version;  // exact pin
  std::string to_string() const { return name + "==" + version; }
};
Expected<PackageSpec> parse_package_spec(std::string_view text);
// INVALID_ARGUMENT unless `spec` is exactly what parse_package_spec makes of "NAME==VERSION" (a name
// and a version of the allowed characters, nothing else): fetch() checks every spec it is given, so a
// name such as "--index-url=..." can never reach pip.
Status check_package_spec(const PackageSpec& spec);
std::string normalize_package_name(std::string_view name);

// One entry of the known-packages table.
struct KnownPackage {
  std::string package;       // normalized name: "jax-cuda13-pjrt"
  std::string plugin_path;   // file inside the wheel: "jax_plugins/xla_cuda13/xla_cuda_plugin.so"
  std::string platform;      // "cpu", "cuda", "rocm", "tpu"
  std::string probe;         // "none", "cuda", "rocm", "tpu": the device probe selection runs for it
  int priority = 0;          // default boot priority: accelerators above CPU
  std::string companions_note;  // what the plugin needs besides itself (e.g. NVIDIA runtime wheels)
};
const std::vector<KnownPackage>& known_packages();
const KnownPackage* find_known_package(std::string_view name);

// One line of plugboard.lock: a plugin's wheel, or a companion wheel (pinned by the wheel's hash only).
struct LockEntry {
  std::string package;  // normalized
  std::string version;
  std::string wheel;           // wheel file name
  std::string wheel_sha256;
  std::string plugin_path;     // inside the wheel (empty for a companion)
  std::string plugin_sha256;   // (empty for a companion)
  bool companion = false;
};
struct LockFile {
  std::vector<LockEntry> entries;
  const LockEntry* find(std::string_view package, std::string_view version) const;
};
// A missing file reads as an empty lock; a malformed one is an error naming the file and the line/field.
Expected<LockFile> read_lock(const std::filesystem::path& path) noexcept;
Status write_lock(const std::filesystem::path& path, const LockFile& lock);  // temp + rename

struct FetchOptions {
  std::filesystem::path cache_dir;           // default: default_cache_dir()
  std::filesystem::path lock_path;           // default: ./plugboard.lock
  bool write_lock = false;                   // --lock: record what was fetched (adds/replaces entries)
  std::optional<std::filesystem::path> offline_from;  // --offline --from DIR: wheels already on disk, no pip
  bool progress = false;                     // progress bar on stderr (the CLI sets it when stderr is a tty)
  std::string python = "python3";            // the interpreter whose pip is used
  int pip_timeout_s = 60;                    // pip's own --timeout (each network operation), seconds
  std::chrono::milliseconds pip_time_limit{std::chrono::minutes(30)};  // pip is killed past this
};

struct FetchedPlugin {
  PackageSpec spec;
  std::string wheel;           // wheel file name
  std::string wheel_sha256;
  std::string plugin_path;     // inside the wheel
  std::string plugin_sha256;
  uint64_t size = 0;
  std::filesystem::path file;  // in the cache: <cache>/plugins/<plugin_sha256>/<basename>
  std::string platform;        // from the table, or "unknown" for an inspected package
  std::string probe;
  int priority = 0;
  bool from_cache = false;     // the plugin was already in the cache (nothing extracted)
};

// $XDG_CACHE_HOME/plugboard (or ~/.cache/plugboard).
std::filesystem::path default_cache_dir();

// Fetches each package; with an entry in the lock, the wheel's and the plugin's sha256 must match it
// (a mismatch is an error naming the package, both hashes, and the lock file). Safe to run in parallel
// with itself (a file lock per cache entry); a failed or interrupted fetch leaves no partial file.
Expected<std::vector<FetchedPlugin>> fetch(std::span<const PackageSpec> packages, const FetchOptions& options) noexcept;

// A whole wheel (a plugin's companion libraries, e.g. nvidia-cuda-runtime-cu13), obtained as fetch()
// obtains a plugin's, and pinned like one: held to its entry in the lock file (kind "companion"), pip
// given --require-hashes with the locked hash, recorded there with write_lock. The caller extracts
// what it needs.
struct FetchedWheel {
  PackageSpec spec;
  std::filesystem::path wheel;
  std::string wheel_sha256;
};
Expected<FetchedWheel> fetch_wheel(const PackageSpec& spec, const FetchOptions& options) noexcept;

}  // namespace plugboard::fetch
