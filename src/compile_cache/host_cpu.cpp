#include "compile_cache/host_cpu.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "base/sha256.h"

namespace plugboard::compile_cache {
namespace {

constexpr const char* kFields[] = {"model name",   "flags",     "CPU implementer", "CPU architecture",
                                   "CPU variant",  "CPU part",  "Features"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "model name\t: Intel..." → "Intel..."
std::string_view value_of(std::string_view line) {
  const size_t colon = line.find(':');
  return colon == std::string_view::npos ? std::string_view() : trim(line.substr(colon + 1));
}

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// At most `limit` names, then "and N more".
std::string list(const std::vector<std::string>& names, size_t limit = 12) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += " and " + std::to_string(names.size() - limit) + " more";
  return out;
}

}  // namespace

HostCpu parse_cpuinfo(std::string_view text) {
  // The first processor's lines, verbatim: the digest is the one cache keys have always held.
  std::string picked, arm;
  HostCpu cpu;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.empty() && !picked.empty()) break;
    for (const char* field : kFields) {
      if (!line.starts_with(field)) continue;
      picked.append(line).append("\n");
      const std::string_view field_name(field);
      if (field_name == "model name") cpu.model = value_of(line);
      else if (field_name == "flags" || field_name == "Features") cpu.flags = words(value_of(line));
      else arm += (arm.empty() ? "" : " ") + std::string(field_name.substr(4)) + " " + std::string(value_of(line));
    }
    at = end + 1;
  }
  if (cpu.model.empty()) cpu.model = arm;
  if (!picked.empty()) cpu.digest = sha256_hex(std::as_bytes(std::span(picked.data(), picked.size())));
  return cpu;
}

Expected<HostCpu> this_host_cpu() {
  static const HostCpu cpu = [] {
    // /proc files report a size of 0, so they are read as a stream (at most 4 MiB).
    std::ifstream in("/proc/cpuinfo");
    std::string text;
    for (std::string line; text.size() < (size_t{4} << 20) && std::getline(in, line);) text.append(line).append("\n");
    return parse_cpuinfo(text);
  }();
  if (cpu.digest.empty())
    return make_error(Code::kUnavailable, "this processor's features could not be read from /proc/cpuinfo");
  return cpu;
}

std::string describe_cpu_difference(const HostCpu& built_on, const HostCpu& here) {
  if (built_on.digest == here.digest) return "";
  std::string out = "built on \"" + built_on.model + "\", this host is \"" + here.model + "\"";
  const std::set<std::string> there_set(built_on.flags.begin(), built_on.flags.end());
  const std::set<std::string> here_set(here.flags.begin(), here.flags.end());
  std::vector<std::string> only_there, only_here;
  for (const std::string& f : built_on.flags)
    if (!here_set.contains(f)) only_there.push_back(f);
  for (const std::string& f : here.flags)
    if (!there_set.contains(f)) only_here.push_back(f);
  if (!only_there.empty()) out += "; features there, not here: " + list(only_there);
  if (!only_here.empty()) out += "; here, not there: " + list(only_here);
  return out;
}

}  // namespace plugboard::compile_cache
