#include "compile_cache/description_text.h"

#include "base/parse_number.h"
#include "compile_cache/entry.h"

namespace plugboard::compile_cache {
namespace {

constexpr char kTab = '\t';

bool one_line(const std::string& s) { return s.find_first_of("\n\r\t") == std::string::npos; }

std::string type_text(const ArrayType& t) {
  std::string out = dtype_name(t.dtype) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i) out += (i ? "," : "") + std::to_string(t.dims[i]);
  return out + "]";
}

std::string types_text(const std::vector<ArrayType>& types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) out += (i ? ";" : "") + type_text(types[i]);
  return out;
}

std::optional<ArrayType> parse_type(std::string_view text) {
  const size_t open = text.find('[');
  if (open == std::string_view::npos || !text.ends_with(']')) return std::nullopt;
  const auto dtype = dtype_from_name(text.substr(0, open));
  if (!dtype) return std::nullopt;
  std::vector<int64_t> dims;
  std::string_view rest = text.substr(open + 1, text.size() - open - 2);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    auto d = parse_int64(rest.substr(0, comma), "dimension", 0);
    if (!d) return std::nullopt;
    dims.push_back(*d);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return ArrayType{*dtype, Dims(dims)};
}

std::optional<std::vector<ArrayType>> parse_types(std::string_view text) {
  std::vector<ArrayType> out;
  while (!text.empty()) {
    const size_t semi = text.find(';');
    auto t = parse_type(text.substr(0, semi));
    if (!t) return std::nullopt;
    out.push_back(std::move(*t));
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  return out;
}

const std::string* find(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace

void put_description(const Description& d, std::map<std::string, std::string>& metadata) {
  if (!one_line(d.name)) return;
  std::string calls = "?";
  if (d.signature.custom_call_targets) {
    calls.clear();
    for (const std::string& c : *d.signature.custom_call_targets) {
      if (!one_line(c)) return;
      calls += (calls.empty() ? "" : std::string(1, kTab)) + c;
    }
  }
  std::string dynamic;
  for (bool b : d.signature.results_dynamic) dynamic += b ? '1' : '0';
  // A description that would crowd the metadata section (thousands of parameters) is left out:
  // the plugin describes the executable when it is loaded.
  const std::string parameters = d.signature.parameters_known ? types_text(d.signature.parameters) : "?";
  const std::string results = types_text(d.signature.results);
  if (d.name.size() + parameters.size() + results.size() + dynamic.size() + calls.size() > kMaxMetadataBytes / 2) return;
  metadata["name"] = d.name;
  metadata["parameters"] = parameters;
  metadata["results"] = results;
  metadata["results_dynamic"] = dynamic;
  metadata["custom_calls"] = calls;
}

std::optional<Description> get_description(const std::map<std::string, std::string>& metadata) {
  const std::string *name = find(metadata, "name"), *parameters = find(metadata, "parameters"),
                    *results = find(metadata, "results"), *dynamic = find(metadata, "results_dynamic"),
                    *calls = find(metadata, "custom_calls");
  if (!name || !parameters || !results || !dynamic || !calls) return std::nullopt;
  Description d;
  d.name = *name;
  if (*parameters != "?") {
    auto p = parse_types(*parameters);
    if (!p) return std::nullopt;
    d.signature.parameters_known = true;
    d.signature.parameters = std::move(*p);
  }
  auto r = parse_types(*results);
  if (!r) return std::nullopt;
  d.signature.results = std::move(*r);
  for (char c : *dynamic) {
    if (c != '0' && c != '1') return std::nullopt;
    d.signature.results_dynamic.push_back(c == '1');
  }
  if (!d.signature.results_dynamic.empty() && d.signature.results_dynamic.size() != d.signature.results.size())
    return std::nullopt;
  if (*calls != "?") {
    std::vector<std::string> names;
    std::string_view rest = *calls;
    while (!rest.empty()) {
      const size_t tab = rest.find(kTab);
      names.emplace_back(rest.substr(0, tab));
      if (tab == std::string_view::npos) break;
      rest.remove_prefix(tab + 1);
    }
    d.signature.custom_call_targets = std::move(names);
  }
  return d;
}

}  // namespace plugboard::compile_cache
