// plugboard.lock: JSON, one object per package, sorted by name so that diffs stay small.
//
//   {
//     "schema": 1,
//     "packages": [
//       {"package": "xla-cpu-pjrt", "version": "0.0.1", "wheel": "xla_cpu_pjrt-0.0.1-...whl",
//        "wheel_sha256": "...", "plugin_path": "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "plugin_sha256": "..."}
//     ]
//   }
#include <algorithm>
#include <tuple>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "fetch/fetch.h"
#include "fetch/package_spec.h"
#include "fetch/temp_file.h"

namespace plugboard::fetch {
namespace {

constexpr int kLockSchema = 1;

Expected<std::string> read_field(const nlohmann::json& entry, const std::string& where, const char* key,
                                 bool is_hash) {
  auto it = entry.find(key);
  if (it == entry.end()) return invalid_argument(where + "." + key + ": missing");
  if (!it->is_string() || it->get_ref<const std::string&>().empty())
    return invalid_argument(where + "." + key + ": expected a non-empty string");
  std::string value = it->get<std::string>();
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

Expected<LockFile> read_lock(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return LockFile{};
    return make_error(Code::kPermissionDenied, "cannot read lock file " + path.string());
  }
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const std::string file = path.string();
  if (doc.is_discarded()) return invalid_argument(file + ": not valid JSON");
  if (!doc.is_object()) return invalid_argument(file + ": expected a JSON object");
  if (!doc.contains("schema") || !doc["schema"].is_number_integer())
    return invalid_argument(file + ": schema: missing or not an integer");
  if (doc["schema"] != kLockSchema)
    return invalid_argument(file + ": schema: version " + doc["schema"].dump() + " is not supported (expected " +
                            std::to_string(kLockSchema) + ")");
  if (!doc.contains("packages") || !doc["packages"].is_array())
    return invalid_argument(file + ": packages: missing or not an array");

  LockFile lock;
  for (size_t i = 0; i < doc["packages"].size(); ++i) {
    const nlohmann::json& e = doc["packages"][i];
    const std::string where = file + ": packages[" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid_argument(where + ": expected an object");
    LockEntry entry;
    PB_ASSIGN_OR_RETURN(entry.package, read_field(e, where, "package", false));
    PB_ASSIGN_OR_RETURN(entry.version, read_field(e, where, "version", false));
    PB_ASSIGN_OR_RETURN(entry.wheel, read_field(e, where, "wheel", false));
    PB_ASSIGN_OR_RETURN(entry.wheel_sha256, read_field(e, where, "wheel_sha256", true));
    PB_ASSIGN_OR_RETURN(entry.plugin_path, read_field(e, where, "plugin_path", false));
    PB_ASSIGN_OR_RETURN(entry.plugin_sha256, read_field(e, where, "plugin_sha256", true));
    if (entry.package != normalize_package_name(entry.package))
      return invalid_argument(where + ".package: \"" + entry.package + "\" is not a normalized name (expected \"" +
                              normalize_package_name(entry.package) + "\")");
    if (lock.find(entry.package, entry.version))
      return invalid_argument(where + ": " + entry.package + "==" + entry.version + " is listed twice");
    lock.entries.push_back(std::move(entry));
  }
  return lock;
}

Status write_lock(const std::filesystem::path& path, const LockFile& lock) {
  std::vector<LockEntry> entries = lock.entries;
  std::sort(entries.begin(), entries.end(), [](const LockEntry& a, const LockEntry& b) {
    return std::tie(a.package, a.version) < std::tie(b.package, b.version);
  });
  nlohmann::ordered_json doc = {{"schema", kLockSchema}, {"packages", nlohmann::ordered_json::array()}};
  for (const LockEntry& e : entries)
    doc["packages"].push_back({{"package", e.package},
                               {"version", e.version},
                               {"wheel", e.wheel},
                               {"wheel_sha256", e.wheel_sha256},
                               {"plugin_path", e.plugin_path},
                               {"plugin_sha256", e.plugin_sha256}});
  const std::filesystem::path dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  PB_ASSIGN_OR_RETURN(TempFile tmp, TempFile::create(dir, "." + path.filename().string() + ".tmp-"));
  PB_RETURN_IF_ERROR(tmp.write_all(doc.dump(2) + "\n"));
  return annotate(tmp.commit(path, 0644), "writing lock file " + path.string());
}

}  // namespace plugboard::fetch
