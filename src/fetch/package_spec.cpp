// "NAME==VERSION" arguments and the names pip compares: PEP 503 for projects, PEP 427 for wheel files.
#include "fetch/package_spec.h"

#include <cctype>

namespace plugboard::fetch {
namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// PEP 508: letters and digits at both ends, '.', '-', '_' inside.
bool valid_name(std::string_view name) {
  if (name.empty() || !is_alnum(name.front()) || !is_alnum(name.back())) return false;
  for (char c : name)
    if (!is_alnum(c) && c != '.' && c != '-' && c != '_') return false;
  return true;
}

// An exact PEP 440 version: letters, digits and . + ! - _ (no wildcard, no operator).
bool valid_version(std::string_view version) {
  if (version.empty() || !is_alnum(version.front()) || !is_alnum(version.back())) return false;
  for (char c : version)
    if (!is_alnum(c) && c != '.' && c != '+' && c != '!' && c != '-' && c != '_') return false;
  return true;
}

// Versions in wheel file names have '-' escaped as '_'; case does not matter.
std::string comparable_version(std::string_view v) {
  std::string out;
  for (char c : v) out += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string normalize_package_name(std::string_view name) {
  std::string out;
  bool in_separator = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      in_separator = true;
      continue;
    }
    if (in_separator && !out.empty()) out += '-';
    in_separator = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Expected<PackageSpec> parse_package_spec(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const std::string_view s = trim(text);
  const size_t eq = s.find("==");
  if (eq == std::string_view::npos)
    return invalid_argument(quoted + " is not NAME==VERSION: a package is fetched at an exact version");
  const std::string_view name = trim(s.substr(0, eq));
  const std::string_view version = trim(s.substr(eq + 2));
  if (!valid_name(name))
    return invalid_argument(quoted + ": \"" + std::string(name) +
                            "\" is not a package name (letters, digits, '.', '-', '_')");
  if (!version.empty() && version.front() == '=')
    return invalid_argument(quoted + ": use == (an exact pin), not ===");
  if (!valid_version(version))
    return invalid_argument(quoted + ": \"" + std::string(version) + "\" is not an exact version");
  return PackageSpec{std::string(name), std::string(version)};
}

Status check_package_spec(const PackageSpec& spec) {
  auto parsed = parse_package_spec(spec.name + "==" + spec.version);
  if (!parsed) return std::unexpected(std::move(parsed).error());
  if (parsed->name != spec.name || parsed->version != spec.version)
    return invalid_argument("\"" + spec.to_string() + "\" is not NAME==VERSION (blanks around the name or version)");
  return ok();
}

std::optional<WheelFileName> parse_wheel_file_name(std::string_view file_name) {
  // {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl
  constexpr std::string_view kSuffix = ".whl";
  if (file_name.size() <= kSuffix.size() || !file_name.ends_with(kSuffix)) return std::nullopt;
  std::string_view stem = file_name.substr(0, file_name.size() - kSuffix.size());
  size_t parts = 1;
  for (char c : stem) parts += c == '-';
  if (parts != 5 && parts != 6) return std::nullopt;
  const size_t first = stem.find('-');
  const size_t second = stem.find('-', first + 1);
  WheelFileName out{std::string(stem.substr(0, first)), std::string(stem.substr(first + 1, second - first - 1))};
  if (out.name.empty() || out.version.empty()) return std::nullopt;
  return out;
}

bool wheel_is_for(std::string_view file_name, const PackageSpec& spec) {
  auto parsed = parse_wheel_file_name(file_name);
  return parsed && normalize_package_name(parsed->name) == normalize_package_name(spec.name) &&
         comparable_version(parsed->version) == comparable_version(spec.version);
}

}  // namespace plugboard::fetch
