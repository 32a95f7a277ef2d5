// Reads the embedded table of known packages into KnownPackage entries and looks names up in it.
#include "fetch/known_packages.h"

#include <climits>

#include <nlohmann/json.hpp>

#include "fetch/package_spec.h"
#include "platforms/registry.h"

namespace plugboard::fetch {

extern const std::string_view kKnownPackagesJson;  // known_packages_data.cpp (generated)

namespace {

constexpr int kSchema = 1;

Expected<std::string> string_field(const nlohmann::json& j, const std::string& where, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return invalid_argument(where + "." + key + ": missing or not a string");
  return it->get<std::string>();
}

}  // namespace

Expected<std::vector<KnownPackage>> parse_known_packages(std::string_view json_text, std::string_view source) {
  const std::string src(source);
  const nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument(src + ": not valid JSON");
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != kSchema)
    return invalid_argument(src + ": schema: expected " + std::to_string(kSchema));
  if (!doc.contains("packages") || !doc["packages"].is_array())
    return invalid_argument(src + ": packages: missing or not an array");
  std::vector<KnownPackage> out;
  for (size_t i = 0; i < doc["packages"].size(); ++i) {
    const nlohmann::json& p = doc["packages"][i];
    const std::string where = src + ": packages[" + std::to_string(i) + "]";
    if (!p.is_object()) return invalid_argument(where + ": not an object");
    KnownPackage k;
    PB_ASSIGN_OR_RETURN(k.package, string_field(p, where, "package"));
    PB_ASSIGN_OR_RETURN(k.plugin_path, string_field(p, where, "plugin_path"));
    PB_ASSIGN_OR_RETURN(k.platform, string_field(p, where, "platform"));
    const platforms::PlatformTraits* platform = platforms::find_platform(k.platform);
    if (!platform) return invalid_argument(where + ".platform: \"" + k.platform + "\" is not a platform plugboard knows");
    // The probe and the priority are the platform's unless the entry says otherwise.
    k.probe = platforms::probe_kind_name(platform->probe);
    if (p.contains("probe")) {
      PB_ASSIGN_OR_RETURN(k.probe, string_field(p, where, "probe"));
      if (auto kind = platforms::parse_probe_kind(k.probe); !kind)
        return invalid_argument(where + ".probe: " + kind.error().message());
    }
    k.priority = platform->priority;
    if (p.contains("priority")) {
      const nlohmann::json& priority = p["priority"];
      if (!priority.is_number_integer() || priority.get<int64_t>() < INT_MIN || priority.get<int64_t>() > INT_MAX)
        return invalid_argument(where + ".priority: not an integer");
      k.priority = priority.get<int>();
    }
    PB_ASSIGN_OR_RETURN(k.companions_note, string_field(p, where, "companions"));
    if (k.package != normalize_package_name(k.package))
      return invalid_argument(where + ".package: \"" + k.package + "\" is not PEP 503 normalized");
    out.push_back(std::move(k));
  }
  return out;
}

const Expected<std::vector<KnownPackage>>& embedded_known_packages() {
  static const Expected<std::vector<KnownPackage>> table =
      parse_known_packages(kKnownPackagesJson, "known_packages.json (embedded)");
  return table;
}

const std::vector<KnownPackage>& known_packages() {
  static const std::vector<KnownPackage> empty;
  const auto& table = embedded_known_packages();
  return table ? *table : empty;
}

const KnownPackage* find_known_package(std::string_view name) {
  const std::string normalized = normalize_package_name(name);
  for (const KnownPackage& k : known_packages())
    if (k.package == normalized) return &k;
  return nullptr;
}

}  // namespace plugboard::fetch
