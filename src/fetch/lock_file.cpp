// plugboard.lock: JSON, one object per package, sorted by name so that diffs stay small.
//
//   {
//     "schema": 1,
//     "packages": [
//       {"package": "xla-cpu-pjrt", "version": "0.0.1", "wheel": "xla_cpu_pjrt-0.0.1-...whl",
//        "wheel_sha256": "...", "plugin_path": "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "plugin_sha256": "..."},
//       {"package": "nvidia-cuda-runtime", "version": "13.0.96", "kind": "companion", "wheel": "...",
//        "wheel_sha256": "..."}
//     ]
//   }
//
// A companion wheel (libraries a plugin needs) is pinned by its wheel's hash alone. The file is read
// as untrusted JSON (base/strict_json.h): no exception, no duplicate key, no deep nesting.
#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/regular_file.h"
#include "base/no_throw.h"
#include "base/sha256.h"
#include "base/strict_json.h"
#include "fetch/fetch.h"
#include "fetch/package_spec.h"
#include "base/atomic_file.h"

namespace plugboard::fetch {
namespace {

constexpr int kLockSchema = 1;

Expected<std::string> read_field(const nlohmann::json& entry, const std::string& where, const char* key,
                                 bool is_hash) {
  if (!entry.contains(key)) return invalid_argument(where + "." + key + ": missing");
  PB_ASSIGN_OR_RETURN(std::string value, strict_json::get_string(entry, key, where));
  if (value.empty()) return invalid_argument(where + "." + key + ": expected a non-empty string");
  if (is_hash && !is_sha256_hex(value))
    return invalid_argument(where + "." + key + ": \"" + value + "\" is not a sha256 (64 lowercase hex digits)");
  return value;
}

}  // namespace

const LockEntry* LockFile::find(std::string_view package, std::string_view version) const {
  const std::string normalized = normalize_package_name(package);
  for (const LockEntry& e : entries)
    if (e.package == normalized && e.version == version) return &e;
  return nullptr;
}

Expected<LockFile> read_lock(const std::filesystem::path& path) noexcept {
  return no_throw("reading a lock file", [&]() -> Expected<LockFile> {
    const std::string file = path.string();
    auto text = read_regular_file(path, kMaxManifestBytes);
    if (!text && text.error().code() == Code::kNotFound) return LockFile{};
    if (!text) return std::unexpected(std::move(text).error().annotate("reading lock file " + file));
    auto parsed = strict_json::parse(*text, file);
    if (!parsed) {
      // "not valid JSON" whatever the parser's own words, so that the message says what to fix.
      if (parsed.error().message().find("not valid JSON") != std::string::npos)
        return invalid_argument(file + ": not valid JSON (" + parsed.error().message() + ")");
      return std::unexpected(std::move(parsed).error());
    }
    const nlohmann::json& doc = *parsed;
    if (!doc.contains("schema") || !doc["schema"].is_number_integer())
      return invalid_argument(file + ": schema: missing or not an integer");
    if (doc["schema"] != kLockSchema)
      return invalid_argument(file + ": schema: version " + doc["schema"].dump() + " is not supported (expected " +
                              std::to_string(kLockSchema) + ")");
    if (!doc.contains("packages") || !doc["packages"].is_array())
      return invalid_argument(file + ": packages: missing or not an array");

    LockFile lock;
    const nlohmann::json& packages = doc["packages"];
    for (size_t i = 0; i < packages.size(); ++i) {
      const nlohmann::json& e = packages[i];
      const std::string where = file + ": packages[" + std::to_string(i) + "]";
      if (!e.is_object()) return invalid_argument(where + ": expected an object");
      LockEntry entry;
      PB_ASSIGN_OR_RETURN(std::optional<std::string> kind, strict_json::get_optional_string(e, "kind", where));
      if (kind && *kind != "plugin" && *kind != "companion")
        return invalid_argument(where + ".kind: \"" + *kind + "\" is neither \"plugin\" nor \"companion\"");
      entry.companion = kind && *kind == "companion";
      PB_ASSIGN_OR_RETURN(entry.package, read_field(e, where, "package", false));
      PB_ASSIGN_OR_RETURN(entry.version, read_field(e, where, "version", false));
      PB_ASSIGN_OR_RETURN(entry.wheel, read_field(e, where, "wheel", false));
      PB_ASSIGN_OR_RETURN(entry.wheel_sha256, read_field(e, where, "wheel_sha256", true));
      if (!entry.companion) {
        PB_ASSIGN_OR_RETURN(entry.plugin_path, read_field(e, where, "plugin_path", false));
        PB_ASSIGN_OR_RETURN(entry.plugin_sha256, read_field(e, where, "plugin_sha256", true));
      }
      if (entry.package != normalize_package_name(entry.package))
        return invalid_argument(where + ".package: \"" + entry.package + "\" is not a normalized name (expected \"" +
                                normalize_package_name(entry.package) + "\")");
      if (lock.find(entry.package, entry.version))
        return invalid_argument(where + ": " + entry.package + "==" + entry.version + " is listed twice");
      lock.entries.push_back(std::move(entry));
    }
    return lock;
  });
}

Status write_lock(const std::filesystem::path& path, const LockFile& lock) {
  std::vector<LockEntry> entries = lock.entries;
  std::sort(entries.begin(), entries.end(), [](const LockEntry& a, const LockEntry& b) {
    return std::tie(a.package, a.version) < std::tie(b.package, b.version);
  });
  nlohmann::ordered_json doc = {{"schema", kLockSchema}, {"packages", nlohmann::ordered_json::array()}};
  for (const LockEntry& e : entries) {
    if (e.companion) {
      doc["packages"].push_back({{"package", e.package},
                                 {"version", e.version},
                                 {"kind", "companion"},
                                 {"wheel", e.wheel},
                                 {"wheel_sha256", e.wheel_sha256}});
      continue;
    }
    doc["packages"].push_back({{"package", e.package},
                               {"version", e.version},
                               {"wheel", e.wheel},
                               {"wheel_sha256", e.wheel_sha256},
                               {"plugin_path", e.plugin_path},
                               {"plugin_sha256", e.plugin_sha256}});
  }
  const std::filesystem::path dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  PB_ASSIGN_OR_RETURN(AtomicFile tmp, AtomicFile::create(dir, "." + path.filename().string() + ".tmp-"));
  PB_RETURN_IF_ERROR(tmp.write_all(doc.dump(2) + "\n"));
  return annotate(tmp.commit(path, 0644), "writing lock file " + path.string());
}

}  // namespace plugboard::fetch
