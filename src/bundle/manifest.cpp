#include "bundle/manifest.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <set>

#include "base/atomic_file.h"
#include "base/no_throw.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "base/strict_json.h"
#include "bundle/precompiled_host.h"
#include "select/create_options_json.h"

namespace plugboard::bundle {
namespace {
namespace sj = strict_json;
using json = sj::json;

std::string manifest_path(const std::filesystem::path& dir) { return (dir / kManifestName).string(); }

std::unexpected<Error> bad(const std::filesystem::path& dir, const std::string& field, const std::string& what) {
  return invalid_argument(manifest_path(dir) + ": " + field + " " + what);
}

// A strict_json getter's result, its error naming the manifest file in front of the field.
template <class T>
Expected<T> in_file(const std::filesystem::path& dir, Expected<T> result) {
  if (!result) return std::unexpected(Error(result.error().code(), manifest_path(dir) + ": " + result.error().message()));
  return result;
}

// A file path field: a string without control characters, resolving inside the bundle.
Expected<std::string> get_file(const json& obj, const std::filesystem::path& dir, const std::string& where) {
  PB_ASSIGN_OR_RETURN(std::string file, in_file(dir, sj::get_string(obj, "file", where)));
  PB_RETURN_IF_ERROR(resolve_in_bundle(dir, file, where + ".file"));
  return file;
}

// A byte count: a file's size fits off_t.
Expected<uint64_t> get_size(const json& obj, const std::filesystem::path& dir, const std::string& where) {
  return in_file(dir, sj::get_uint(obj, "size", where, static_cast<uint64_t>(INT64_MAX)));
}

Expected<std::string> get_sha256(const json& obj, const std::filesystem::path& dir, const std::string& where) {
  PB_ASSIGN_OR_RETURN(std::string sha, in_file(dir, sj::get_string(obj, "sha256", where)));
  if (!is_sha256_hex(sha)) return bad(dir, where + ".sha256", "must be 64 lowercase hex digits");
  return sha;
}

// An optional field's value: nullptr when it is absent or null.
const json* optional_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Expected<CompanionFile> parse_companion(const json& c, const std::filesystem::path& dir, const std::string& cw) {
  if (!c.is_object()) return bad(dir, cw, "must be an object");
  CompanionFile f;
  PB_ASSIGN_OR_RETURN(f.file, get_file(c, dir, cw));
  PB_ASSIGN_OR_RETURN(f.size, get_size(c, dir, cw));
  PB_ASSIGN_OR_RETURN(f.sha256, get_sha256(c, dir, cw));
  PB_ASSIGN_OR_RETURN(auto from, in_file(dir, sj::get_optional_string(c, "from", cw)));
  f.from = from.value_or("");
  return f;
}

// "stablehlo": {"current", "minimum"}, both optional.
Status parse_stablehlo(const json& t, const std::filesystem::path& dir, const std::string& where, TargetEntry& e) {
  const json* s = optional_field(t, "stablehlo");
  if (!s) return ok();
  const std::string sw = where + ".stablehlo";
  if (!s->is_object()) return bad(dir, sw, "must be an object");
  PB_ASSIGN_OR_RETURN(e.stablehlo_current, in_file(dir, sj::get_optional_string(*s, "current", sw)));
  PB_ASSIGN_OR_RETURN(e.stablehlo_minimum, in_file(dir, sj::get_optional_string(*s, "minimum", sw)));
  return ok();
}

// "provenance": where the plugin came from (package and version; wheel, its sha256, the member path).
Status parse_provenance(const json& t, const std::filesystem::path& dir, const std::string& where, TargetEntry& e) {
  const json* p = optional_field(t, "provenance");
  if (!p) return ok();
  const std::string pw = where + ".provenance";
  if (!p->is_object()) return bad(dir, pw, "must be an object");
  Provenance pv;
  PB_ASSIGN_OR_RETURN(pv.package, in_file(dir, sj::get_string(*p, "package", pw)));
  PB_ASSIGN_OR_RETURN(pv.version, in_file(dir, sj::get_string(*p, "version", pw)));
  for (auto [key, value] : {std::pair{"wheel", &pv.wheel}, std::pair{"wheel_sha256", &pv.wheel_sha256},
                            std::pair{"path_in_wheel", &pv.path_in_wheel}}) {
    PB_ASSIGN_OR_RETURN(auto v, in_file(dir, sj::get_optional_string(*p, key, pw)));
    *value = v.value_or("");
  }
  e.provenance = std::move(pv);
  return ok();
}

// What selection uses beyond the file: "create_options", "probe", "priority", all optional.
Status parse_selection_fields(const json& t, const std::filesystem::path& dir, const std::string& where, TargetEntry& e) {
  if (const json* o = optional_field(t, "create_options")) {
    auto opts = select::create_options_from_json(*o, where + ".create_options");
    if (!opts) return std::unexpected(Error(Code::kInvalidArgument, manifest_path(dir) + ": " + opts.error().message()));
    e.create_options = std::move(*opts);
  }
  if (optional_field(t, "probe")) {
    PB_ASSIGN_OR_RETURN(std::string probe, in_file(dir, sj::get_string(t, "probe", where)));
    auto kind = select::parse_probe_kind(probe);
    if (!kind) return bad(dir, where + ".probe", kind.error().message());
    e.probe = *kind;
  }
  if (optional_field(t, "priority")) {
    PB_ASSIGN_OR_RETURN(int64_t priority, in_file(dir, sj::get_int(t, "priority", where, INT_MIN, INT_MAX)));
    e.priority = static_cast<int>(priority);
  }
  return ok();
}

// "companions": a list of files the plugin needs beside it.
Status parse_companions(const json& t, const std::filesystem::path& dir, const std::string& where, TargetEntry& e) {
  const json* cs = optional_field(t, "companions");
  if (!cs) return ok();
  if (!cs->is_array()) return bad(dir, where + ".companions", "must be a list");
  for (size_t k = 0; k < cs->size(); ++k) {
    PB_ASSIGN_OR_RETURN(CompanionFile f, parse_companion((*cs)[k], dir, where + ".companions[" + std::to_string(k) + "]"));
    e.companions.push_back(std::move(f));
  }
  return ok();
}

// "built_on" of a precompiled program: what its key held about the machine that compiled it.
Expected<std::optional<BuiltOn>> parse_built_on(const json& p, const std::filesystem::path& dir, const std::string& pw) {
  const json* b = optional_field(p, "built_on");
  if (!b) return std::nullopt;
  const std::string where = pw + ".built_on";
  if (!b->is_object()) return bad(dir, where, "must be an object");
  BuiltOn out;
  const std::pair<const char*, std::string*> fields[] = {
      {"cpu", &out.cpu}, {"cpu_digest", &out.cpu_digest}, {"cpu_flags", &out.cpu_flags}, {"xla_flags", &out.xla_flags}};
  for (auto [key, field] : fields) {
    PB_ASSIGN_OR_RETURN(std::optional<std::string> v, in_file(dir, sj::get_optional_string(*b, key, where)));
    if (v) *field = std::move(*v);
  }
  if (!out.cpu_digest.empty() && !is_sha256_hex(out.cpu_digest)) return bad(dir, where + ".cpu_digest", "must be 64 lowercase hex digits");
  return out;
}

// "precompiled": the programs compiled for this target when the bundle was made.
Status parse_precompiled(const json& t, const std::filesystem::path& dir, const std::string& where, TargetEntry& e) {
  const json* ps = optional_field(t, "precompiled");
  if (!ps) return ok();
  if (!ps->is_array()) return bad(dir, where + ".precompiled", "must be a list");
  for (size_t k = 0; k < ps->size(); ++k) {
    const std::string pw = where + ".precompiled[" + std::to_string(k) + "]";
    const json& p = (*ps)[k];
    if (!p.is_object()) return bad(dir, pw, "must be an object");
    PrecompiledProgram pp;
    PB_ASSIGN_OR_RETURN(pp.program, in_file(dir, sj::get_string(p, "program", pw)));
    PB_ASSIGN_OR_RETURN(pp.file, get_file(p, dir, pw));
    const std::filesystem::path name = std::filesystem::path(pp.file).filename();
    if (name.extension() != ".pbx" || !is_sha256_hex(name.stem().string()))
      return bad(dir, pw + ".file", "must name a compile-cache entry (<64 hex digits>.pbx), not '" + name.string() + "'");
    PB_ASSIGN_OR_RETURN(pp.size, get_size(p, dir, pw));
    PB_ASSIGN_OR_RETURN(pp.sha256, get_sha256(p, dir, pw));
    PB_ASSIGN_OR_RETURN(pp.built_on, parse_built_on(p, dir, pw));
    e.precompiled.push_back(std::move(pp));
  }
  return ok();
}

Expected<TargetEntry> parse_target(const json& t, const std::filesystem::path& dir, const std::string& where) {
  if (!t.is_object()) return bad(dir, where, "must be an object");
  TargetEntry e;
  PB_ASSIGN_OR_RETURN(e.name, in_file(dir, sj::get_string(t, "name", where)));
  if (!is_valid_target_name(e.name))
    return bad(dir, where + ".name", "'" + e.name.substr(0, 80) + "' is not a valid target name (letters, digits, _ . -; at most 64)");
  PB_ASSIGN_OR_RETURN(e.platform, in_file(dir, sj::get_string(t, "platform", where)));
  PB_ASSIGN_OR_RETURN(e.file, get_file(t, dir, where));
  PB_ASSIGN_OR_RETURN(e.size, get_size(t, dir, where));
  PB_ASSIGN_OR_RETURN(e.sha256, get_sha256(t, dir, where));
  PB_ASSIGN_OR_RETURN(e.pjrt_api, in_file(dir, sj::get_optional_string(t, "pjrt_api", where)));
  PB_RETURN_IF_ERROR(parse_stablehlo(t, dir, where, e));
  PB_RETURN_IF_ERROR(parse_provenance(t, dir, where, e));
  PB_RETURN_IF_ERROR(parse_selection_fields(t, dir, where, e));
  PB_RETURN_IF_ERROR(parse_companions(t, dir, where, e));
  PB_RETURN_IF_ERROR(parse_precompiled(t, dir, where, e));
  return e;
}

// strict_json keeps an object's keys sorted; create options keep the order the file gives them (a
// manifest read and written again is the same file). `ordered` is the same document parsed in order.
void keep_file_order(std::vector<NamedValue>& options, const nlohmann::ordered_json& ordered, size_t target) {
  if (!ordered.is_object() || !ordered.contains("targets") || !ordered["targets"].is_array() ||
      target >= ordered["targets"].size())
    return;
  const auto& t = ordered["targets"][target];
  if (!t.is_object() || !t.contains("create_options") || !t["create_options"].is_object()) return;
  std::vector<std::string> order;
  for (const auto& [key, value] : t["create_options"].items()) order.push_back(key);
  auto rank = [&](const NamedValue& o) { return std::find(order.begin(), order.end(), o.name) - order.begin(); };
  std::stable_sort(options.begin(), options.end(), [&](const NamedValue& a, const NamedValue& b) { return rank(a) < rank(b); });
}

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

bool is_valid_target_name(std::string_view s) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (s.empty() || s.size() > 64 || !alnum(s.front())) return false;
  for (char c : s)
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

Expected<Manifest> parse_manifest(const std::string& text, const std::filesystem::path& dir) noexcept {
  return no_throw("reading a bundle manifest", [&]() -> Expected<Manifest> {
    PB_ASSIGN_OR_RETURN(json j, sj::parse(text, manifest_path(dir)));
    Manifest m;
    PB_ASSIGN_OR_RETURN(uint64_t schema, in_file(dir, sj::get_uint(j, "schema", "")));
    if (schema != static_cast<uint64_t>(kManifestSchema))
      return bad(dir, "schema", "is " + std::to_string(schema) + "; this plugboard reads schema " + std::to_string(kManifestSchema));
    m.schema = kManifestSchema;
    auto targets = j.find("targets");
    if (targets == j.end() || !targets->is_array()) return bad(dir, "targets", "is missing or not a list");
    std::set<std::string> names;
    // Checked already (nesting, duplicates, syntax): parsed again only for the order of create options.
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    for (size_t i = 0; i < targets->size(); ++i) {
      const std::string where = "targets[" + std::to_string(i) + "]";
      PB_ASSIGN_OR_RETURN(TargetEntry e, parse_target((*targets)[i], dir, where));
      keep_file_order(e.create_options, ordered, i);
      if (!names.insert(e.name).second) return bad(dir, where + ".name", "'" + e.name + "' appears twice");
      m.targets.push_back(std::move(e));
    }
    return m;
  });
}

Expected<Manifest> read_manifest(const std::filesystem::path& dir) noexcept {
  return no_throw("reading a bundle manifest", [&]() -> Expected<Manifest> {
    const std::filesystem::path path = dir / kManifestName;
    // Only a regular file, at most kMaxManifestBytes: a FIFO would hang the read, /dev/zero never end.
    auto text = read_regular_file(path, kMaxManifestBytes);
    if (!text) {
      if (text.error().code() == Code::kNotFound)
        return make_error(Code::kNotFound, "bundle " + dir.string() + " has no readable " + kManifestName + " (" +
                                               text.error().message() + ")");
      return std::unexpected(Error(text.error().code(), "bundle " + dir.string() + ": " + text.error().message()));
    }
    return parse_manifest(*text, dir);
  });
}

Status write_manifest(const std::filesystem::path& dir, const Manifest& m) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["schema"] = m.schema;
  j["targets"] = ojson::array();
  for (const auto& e : m.targets) {
    ojson t;
    t["name"] = e.name;
    t["platform"] = e.platform;
    t["file"] = e.file;
    t["size"] = e.size;
    t["sha256"] = e.sha256;
    t["pjrt_api"] = e.pjrt_api ? ojson(*e.pjrt_api) : ojson();
    ojson s = ojson::object();
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
    t["companions"] = ojson::array();
    for (const auto& c : e.companions)
      t["companions"].push_back({{"file", c.file}, {"size", c.size}, {"sha256", c.sha256}, {"from", c.from}});
    if (!e.precompiled.empty()) {
      t["precompiled"] = ojson::array();
      for (const auto& p : e.precompiled) {
        ojson entry = {{"program", p.program}, {"file", p.file}, {"size", p.size}, {"sha256", p.sha256}};
        if (p.built_on) {
          ojson b = ojson::object();
          if (!p.built_on->cpu_digest.empty())
            b = {{"cpu", p.built_on->cpu}, {"cpu_digest", p.built_on->cpu_digest}, {"cpu_flags", p.built_on->cpu_flags}};
          b["xla_flags"] = p.built_on->xla_flags;
          entry["built_on"] = std::move(b);
        }
        t["precompiled"].push_back(std::move(entry));
      }
    }
    j["targets"].push_back(std::move(t));
  }
  const std::filesystem::path path = dir / kManifestName;
  std::string text;
  try {
    text = j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8
    return invalid_argument("cannot write " + path.string() + ": " + e.what());
  }
  return annotate(write_file_atomically(path, text, 0644), "writing " + path.string());
}

std::vector<select::Candidate> bundle_candidates(const std::filesystem::path& dir, const Manifest& m) {
  std::vector<select::Candidate> out;
  for (size_t i = 0; i < m.targets.size(); ++i) {
    const TargetEntry& e = m.targets[i];
    select::Candidate c;
    c.name = e.name;
    c.platform = e.platform;
    c.source = "bundle " + dir.string() + " (targets[" + std::to_string(i) + "])";
    c.origin = "bundle";
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
    for (size_t k = 0; k < e.precompiled.size(); ++k) {
      const std::string field = "targets[" + std::to_string(i) + "].precompiled[" + std::to_string(k) + "].file";
      // An entry that no longer resolves inside the bundle is left out: its program is compiled.
      if (auto pp = resolve_in_bundle(dir, e.precompiled[k].file, field))
        c.precompiled.push_back({*pp, e.precompiled[k].size, e.precompiled[k].sha256});
    }
    c.precompiled_mismatch = precompiled_mismatch_here(e);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace plugboard::bundle
