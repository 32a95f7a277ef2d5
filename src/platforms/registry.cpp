#include "platforms/registry.h"

#include "platforms/cpu/cpu.h"
#include "platforms/cuda/cuda.h"
#include "platforms/rocm/rocm.h"
#include "platforms/tpu/tpu.h"

namespace plugboard::platforms {
namespace {

// ::tolower of a negative char (a byte past 0x7f) is undefined: lower ASCII letters only.
std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

const std::vector<PlatformTraits>& platforms() {
  static const std::vector<PlatformTraits> table = {cuda_platform(), rocm_platform(), tpu_platform(), cpu_platform()};
  return table;
}

const PlatformTraits* find_platform(std::string_view name) {
  for (const PlatformTraits& p : platforms())
    if (p.name == name) return &p;
  return nullptr;
}

const PlatformTraits* platform_for_probe(ProbeKind kind) {
  if (kind == ProbeKind::kNone) return nullptr;
  for (const PlatformTraits& p : platforms())
    if (p.probe == kind) return &p;
  return nullptr;
}

const PlatformTraits* platform_for_client(std::string_view platform_name) {
  const std::string name = lower_ascii(platform_name);
  for (const PlatformTraits& p : platforms())
    for (const std::string& n : p.client_platform_names)
      if (n == name) return &p;
  return nullptr;
}

const PlatformTraits* platform_named_in(std::string_view text) {
  const std::string lowered = lower_ascii(text);
  for (const PlatformTraits& p : platforms())
    for (const std::string& pattern : p.name_patterns)
      if (lowered.find(pattern) != std::string::npos) return &p;
  return nullptr;
}

const PlatformTraits* platform_for_ffi(std::string_view ffi_platform) {
  const std::string wanted = lower_ascii(ffi_platform);
  for (const PlatformTraits& p : platforms())
    if (p.callbacks && lower_ascii(p.callbacks->ffi_platform) == wanted) return &p;
  return nullptr;
}

std::string probe_kind_name(ProbeKind kind) {
  const PlatformTraits* p = platform_for_probe(kind);
  return p ? p->name : "none";
}

Expected<ProbeKind> parse_probe_kind(std::string_view name) {
  if (name == "none") return ProbeKind::kNone;
  std::vector<std::string> names;
  for (const PlatformTraits& p : platforms()) {
    if (p.probe == ProbeKind::kNone) continue;
    if (p.name == name) return p.probe;
    names.push_back(p.name);
  }
  std::string expected = "none";
  for (size_t i = 0; i < names.size(); ++i) expected += (i + 1 == names.size() ? " or " : ", ") + names[i];
  return invalid_argument("unknown probe '" + std::string(name) + "' (expected " + expected + ")");
}

ProbeResult probe(ProbeKind kind, const ProbeInputs& inputs) {
  const PlatformTraits* p = platform_for_probe(kind);
  if (!p || !p->run_probe) return {true, "no probe needed"};
  return p->run_probe(inputs);
}

}  // namespace plugboard::platforms
