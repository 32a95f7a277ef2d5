#include "conformance/case_spec.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

namespace plugboard::conformance {
namespace {

using nlohmann::json;

Expected<ArraySpec> parse_array(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + " is not an object");
  ArraySpec a;
  if (!j.contains("file") || !j["file"].is_string()) return invalid_argument(where + ".file is missing or not a string");
  a.file = j["file"].get<std::string>();
  if (a.file.find("..") != std::string::npos || (!a.file.empty() && a.file[0] == '/'))
    return invalid_argument(where + ".file '" + a.file + "' leaves the case folder");
  if (!j.contains("dtype") || !j["dtype"].is_string())
    return invalid_argument(where + ".dtype is missing or not a string");
  auto t = dtype_from_name(j["dtype"].get<std::string>());
  if (!t) return invalid_argument(where + ".dtype '" + j["dtype"].get<std::string>() + "' is not a known dtype");
  a.dtype = *t;
  if (!j.contains("shape") || !j["shape"].is_array()) return invalid_argument(where + ".shape is missing or not a list");
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return invalid_argument(where + ".shape holds " + d.dump() + ", not a non-negative integer");
    a.dims.push_back(d.get<int64_t>());
  }
  return a;
}

Expected<std::vector<ArraySpec>> parse_arrays(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || !j[key].is_array()) return invalid_argument(file + ": '" + key + "' is missing or not a list");
  std::vector<ArraySpec> out;
  for (size_t i = 0; i < j[key].size(); ++i) {
    PB_ASSIGN_OR_RETURN(ArraySpec a, parse_array(j[key][i], file + ": " + key + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

Expected<CaseSpec> load_case(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "case.json";
  const std::string shown = file.string();
  std::ifstream in(file);
  if (!in) return make_error(Code::kNotFound, "cannot open " + shown);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(shown + " is not a JSON object");

  CaseSpec c;
  c.dir = dir;
  c.name = j.value("name", dir.filename().string());
  c.description = j.value("description", "");
  c.notes = j.value("notes", "");
  PB_ASSIGN_OR_RETURN(c.inputs, parse_arrays(j, "inputs", shown));
  PB_ASSIGN_OR_RETURN(c.outputs, parse_arrays(j, "outputs", shown));
  if (j.contains("tolerance")) {
    const json& t = j["tolerance"];
    if (!t.is_object() || !t.value("rtol", json(0)).is_number() || !t.value("atol", json(0)).is_number())
      return invalid_argument(shown + ": tolerance must be {\"rtol\": number, \"atol\": number}");
    c.tolerance.rtol = t.value("rtol", 0.0);
    c.tolerance.atol = t.value("atol", 0.0);
  }
  if (j.contains("limitations")) {
    if (!j["limitations"].is_array()) return invalid_argument(shown + ": limitations must be a list");
    for (const auto& l : j["limitations"]) {
      if (!l.is_object() || !l.contains("plugin") || !l["plugin"].is_string())
        return invalid_argument(shown + ": each limitation needs a \"plugin\" string");
      c.limitations.push_back({l["plugin"].get<std::string>(), l.value("reason", "")});
    }
  }
  return c;
}

Expected<std::vector<CaseSpec>> load_cases(const std::filesystem::path& cases_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(cases_dir, ec))
    return make_error(Code::kNotFound, "conformance folder " + cases_dir.string() + " does not exist");
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(cases_dir, ec))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "case.json")) dirs.push_back(entry.path());
  if (ec) return make_error(Code::kPermissionDenied, "cannot list " + cases_dir.string() + ": " + ec.message());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) return make_error(Code::kNotFound, "no case folders (with case.json) in " + cases_dir.string());
  std::vector<CaseSpec> out;
  for (const auto& d : dirs) {
    PB_ASSIGN_OR_RETURN(CaseSpec c, load_case(d));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace plugboard::conformance
