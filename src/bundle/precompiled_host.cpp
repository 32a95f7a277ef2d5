#include "bundle/precompiled_host.h"

#include <sstream>

#include "base/environment.h"

namespace plugboard::bundle {
namespace {

compile_cache::HostCpu as_host_cpu(const BuiltOn& b) {
  compile_cache::HostCpu cpu;
  cpu.digest = b.cpu_digest;
  cpu.model = b.cpu;
  std::istringstream in(b.cpu_flags);
  for (std::string f; in >> f;) cpu.flags.push_back(f);
  return cpu;
}

std::string programs(size_t n, size_t of) {
  return std::to_string(n) + " of " + std::to_string(of) + " precompiled program" + (of == 1 ? "" : "s");
}

}  // namespace

std::string precompiled_mismatch(const TargetEntry& entry, const std::optional<compile_cache::HostCpu>& here,
                                 std::string_view xla_flags_here) {
  const size_t total = entry.precompiled.size();
  size_t other_cpu = 0, other_flags = 0;
  const BuiltOn* cpu_example = nullptr;
  const BuiltOn* flags_example = nullptr;
  for (const PrecompiledProgram& p : entry.precompiled) {
    if (!p.built_on) continue;
    if (!p.built_on->cpu_digest.empty() && (!here || p.built_on->cpu_digest != here->digest)) {
      ++other_cpu;
      if (!cpu_example) cpu_example = &*p.built_on;
    }
    if (p.built_on->xla_flags != xla_flags_here) {
      ++other_flags;
      if (!flags_example) flags_example = &*p.built_on;
    }
  }
  std::string out;
  if (cpu_example) {
    out = programs(other_cpu, total) + " of target " + entry.name + " will not load on this host and compile again on first use: ";
    out += here ? "they were compiled for another processor: " + compile_cache::describe_cpu_difference(as_host_cpu(*cpu_example), *here)
                : "this host's processor cannot be identified (/proc/cpuinfo), and they were compiled on \"" + cpu_example->cpu + "\"";
  }
  if (flags_example) {
    out += std::string(out.empty() ? programs(other_flags, total) + " of target " + entry.name +
                                         " will not load in this process and compile again on first use: "
                                   : "; and ") +
           "they were compiled with XLA_FLAGS=\"" + flags_example->xla_flags + "\", this process has XLA_FLAGS=\"" +
           std::string(xla_flags_here) + "\"";
  }
  return out;
}

std::string precompiled_mismatch_here(const TargetEntry& entry) {
  if (entry.precompiled.empty()) return "";
  auto here = compile_cache::this_host_cpu();
  const std::string flags = environment_override("XLA_FLAGS").value_or("");
  return precompiled_mismatch(entry, here ? std::optional(*here) : std::nullopt, flags);
}

}  // namespace plugboard::bundle
