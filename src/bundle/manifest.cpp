#include "bundle/manifest.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "base/sha256.h"
#include "select/create_options_json.h"

namespace plugboard::bundle {
namespace {
using json = nlohmann::ordered_json;

std::unexpected<Error> bad(const std::filesystem::path& dir, const std::string& field, const std::string& what) {
  return invalid_argument((dir / kManifestName).string() + ": " + field + " " + what);
}

Expected<std::string> get_string(const json& j, const std::filesystem::path& dir, const std::string& where,
                                 const char* key, bool required = true) {
  if (!j.contains(key)) {
    if (!required) return std::string();
    return bad(dir, where + "." + key, "is missing");
  }
  if (!j[key].is_string()) return bad(dir, where + "." + key, "must be a string");
  return j[key].get<std::string>();
}

bool valid_name(const std::string& s) { return std::regex_match(s, std::regex("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")); }

}  // namespace

Expected<std::filesystem::path> resolve_in_bundle(const std::filesystem::path& bundle_dir, const std::string& relative,
                                                  const std::string& field) {
  const std::string where = (bundle_dir / kManifestName).string() + ": " + field;
  if (relative.empty()) return invalid_argument(where + " is empty");
  std::filesystem::path rel(relative);
  if (rel.is_absolute()) return invalid_argument(where + " is an absolute path (" + relative + "): files must be inside the bundle");
  for (const auto& part : rel)
    if (part == "..") return invalid_argument(where + " contains '..' (" + relative + "): files must be inside the bundle");
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::canonical(bundle_dir, ec);
  if (ec) return make_error(Code::kNotFound, "bundle folder " + bundle_dir.string() + ": " + ec.message());
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(root / rel, ec);
  if (ec) return invalid_argument(where + " (" + relative + ") cannot be resolved: " + ec.message());
  auto [r, f] = std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (r != root.end())
    return invalid_argument(where + " (" + relative + ") leads outside the bundle, to " + resolved.string() +
                            " (through a symlink)");
  return resolved;
}

Expected<Manifest> parse_manifest(const std::string& text, const std::filesystem::path& dir) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return bad(dir, "", "is not valid JSON");
  if (!j.is_object()) return bad(dir, "the top level", "must be an object");
  if (!j.contains("schema") || !j["schema"].is_number_integer()) return bad(dir, "schema", "is missing or not an integer");
  Manifest m;
  m.schema = j["schema"].get<int>();
  if (m.schema != kManifestSchema)
    return bad(dir, "schema", "is " + std::to_string(m.schema) + "; this plugboard reads schema " + std::to_string(kManifestSchema));
  if (!j.contains("targets") || !j["targets"].is_array()) return bad(dir, "targets", "is missing or not a list");
  std::set<std::string> names;
  for (size_t i = 0; i < j["targets"].size(); ++i) {
    const json& t = j["targets"][i];
    const std::string where = "targets[" + std::to_string(i) + "]";
    if (!t.is_object()) return bad(dir, where, "must be an object");
    TargetEntry e;
    PB_ASSIGN_OR_RETURN(e.name, get_string(t, dir, where, "name"));
    if (!valid_name(e.name)) return bad(dir, where + ".name", "'" + e.name + "' is not a valid target name (letters, digits, _ . -)");
    if (!names.insert(e.name).second) return bad(dir, where + ".name", "'" + e.name + "' appears twice");
    PB_ASSIGN_OR_RETURN(e.platform, get_string(t, dir, where, "platform"));
    PB_ASSIGN_OR_RETURN(e.file, get_string(t, dir, where, "file"));
    PB_RETURN_IF_ERROR(resolve_in_bundle(dir, e.file, where + ".file"));
    if (!t.contains("size") || !t["size"].is_number_unsigned()) return bad(dir, where + ".size", "is missing or not a byte count");
    e.size = t["size"].get<uint64_t>();
    PB_ASSIGN_OR_RETURN(e.sha256, get_string(t, dir, where, "sha256"));
    if (!is_sha256_hex(e.sha256)) return bad(dir, where + ".sha256", "must be 64 lowercase hex digits");
    if (t.contains("pjrt_api") && !t["pjrt_api"].is_null()) {
      PB_ASSIGN_OR_RETURN(std::string v, get_string(t, dir, where, "pjrt_api"));
      e.pjrt_api = v;
    }
    if (t.contains("stablehlo") && t["stablehlo"].is_object()) {
      const json& s = t["stablehlo"];
      if (s.contains("current") && s["current"].is_string()) e.stablehlo_current = s["current"].get<std::string>();
      if (s.contains("minimum") && s["minimum"].is_string()) e.stablehlo_minimum = s["minimum"].get<std::string>();
    }
    if (t.contains("provenance") && !t["provenance"].is_null()) {
      const json& p = t["provenance"];
      const std::string pw = where + ".provenance";
      if (!p.is_object()) return bad(dir, pw, "must be an object");
      Provenance pv;
      PB_ASSIGN_OR_RETURN(pv.package, get_string(p, dir, pw, "package"));
      PB_ASSIGN_OR_RETURN(pv.version, get_string(p, dir, pw, "version"));
      PB_ASSIGN_OR_RETURN(pv.wheel, get_string(p, dir, pw, "wheel", false));
      PB_ASSIGN_OR_RETURN(pv.wheel_sha256, get_string(p, dir, pw, "wheel_sha256", false));
      PB_ASSIGN_OR_RETURN(pv.path_in_wheel, get_string(p, dir, pw, "path_in_wheel", false));
      e.provenance = pv;
    }
    if (t.contains("create_options")) {
      auto opts = select::create_options_from_json(t["create_options"], where + ".create_options");
      if (!opts) return bad(dir, where + ".create_options", ": " + opts.error().message());
      e.create_options = std::move(*opts);
    }
    if (t.contains("probe")) {
      PB_ASSIGN_OR_RETURN(std::string probe, get_string(t, dir, where, "probe"));
      auto kind = select::parse_probe_kind(probe);
      if (!kind) return bad(dir, where + ".probe", kind.error().message());
      e.probe = *kind;
    }
    if (t.contains("priority")) {
      if (!t["priority"].is_number_integer()) return bad(dir, where + ".priority", "must be an integer");
      e.priority = t["priority"].get<int>();
    }
    if (t.contains("companions")) {
      if (!t["companions"].is_array()) return bad(dir, where + ".companions", "must be a list");
      for (size_t k = 0; k < t["companions"].size(); ++k) {
        const json& c = t["companions"][k];
        const std::string cw = where + ".companions[" + std::to_string(k) + "]";
        if (!c.is_object()) return bad(dir, cw, "must be an object");
        CompanionFile f;
        PB_ASSIGN_OR_RETURN(f.file, get_string(c, dir, cw, "file"));
        PB_RETURN_IF_ERROR(resolve_in_bundle(dir, f.file, cw + ".file"));
        if (!c.contains("size") || !c["size"].is_number_unsigned()) return bad(dir, cw + ".size", "is missing or not a byte count");
        f.size = c["size"].get<uint64_t>();
        PB_ASSIGN_OR_RETURN(f.sha256, get_string(c, dir, cw, "sha256"));
        if (!is_sha256_hex(f.sha256)) return bad(dir, cw + ".sha256", "must be 64 lowercase hex digits");
        PB_ASSIGN_OR_RETURN(f.from, get_string(c, dir, cw, "from", false));
        e.companions.push_back(std::move(f));
      }
    }
    m.targets.push_back(std::move(e));
  }
  return m;
}

Expected<Manifest> read_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifestName;
  std::ifstream in(path);
  if (!in) return make_error(Code::kNotFound, "bundle " + dir.string() + " has no readable " + kManifestName);
  std::ostringstream s;
  s << in.rdbuf();
  return parse_manifest(s.str(), dir);
}

Status write_manifest(const std::filesystem::path& dir, const Manifest& m) {
  json j;
  j["schema"] = m.schema;
  j["targets"] = json::array();
  for (const auto& e : m.targets) {
    json t;
    t["name"] = e.name;
    t["platform"] = e.platform;
    t["file"] = e.file;
    t["size"] = e.size;
    t["sha256"] = e.sha256;
    t["pjrt_api"] = e.pjrt_api ? json(*e.pjrt_api) : json();
    json s = json::object();
    if (e.stablehlo_current) s["current"] = *e.stablehlo_current;
    if (e.stablehlo_minimum) s["minimum"] = *e.stablehlo_minimum;
    t["stablehlo"] = s;
    if (e.provenance)
      t["provenance"] = {{"package", e.provenance->package}, {"version", e.provenance->version},
                         {"wheel", e.provenance->wheel}, {"wheel_sha256", e.provenance->wheel_sha256},
                         {"path_in_wheel", e.provenance->path_in_wheel}};
    else
      t["provenance"] = nullptr;
    t["create_options"] = select::create_options_to_json(e.create_options);
    t["probe"] = select::probe_kind_name(e.probe);
    t["priority"] = e.priority;
    t["companions"] = json::array();
    for (const auto& c : e.companions)
      t["companions"].push_back({{"file", c.file}, {"size", c.size}, {"sha256", c.sha256}, {"from", c.from}});
    j["targets"].push_back(std::move(t));
  }
  const std::filesystem::path path = dir / kManifestName;
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) return make_error(Code::kPermissionDenied, "cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return make_error(Code::kPermissionDenied, "cannot write " + path.string() + ": " + ec.message());
  }
  return ok();
}

std::vector<select::Candidate> bundle_candidates(const std::filesystem::path& dir, const Manifest& m) {
  std::vector<select::Candidate> out;
  for (size_t i = 0; i < m.targets.size(); ++i) {
    const TargetEntry& e = m.targets[i];
    select::Candidate c;
    c.name = e.name;
    c.platform = e.platform;
    c.source = "bundle " + dir.string() + " (targets[" + std::to_string(i) + "])";
    auto path = resolve_in_bundle(dir, e.file, "targets[" + std::to_string(i) + "].file");
    if (path) c.path = *path;
    else {
      c.path = dir / e.file;
      c.problem = path.error();
    }
    c.size = e.size;
    c.sha256 = e.sha256;
    c.probe = e.probe;
    c.priority = e.priority;
    c.create_options = e.create_options;
    for (size_t k = 0; k < e.companions.size(); ++k) {
      const std::string field = "targets[" + std::to_string(i) + "].companions[" + std::to_string(k) + "].file";
      auto cp = resolve_in_bundle(dir, e.companions[k].file, field);
      if (!cp && !c.problem) c.problem = cp.error();
      c.companions.push_back({cp ? *cp : dir / e.companions[k].file, e.companions[k].size, e.companions[k].sha256});
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace plugboard::bundle
