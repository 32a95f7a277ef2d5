#include "select/candidate.h"

namespace plugboard::select {

std::string probe_kind_name(ProbeKind kind) {
  switch (kind) {
    case ProbeKind::kNone: return "none";
    case ProbeKind::kCuda: return "cuda";
    case ProbeKind::kRocm: return "rocm";
    case ProbeKind::kTpu: return "tpu";
  }
  return "none";
}

Expected<ProbeKind> parse_probe_kind(std::string_view name) {
  for (ProbeKind k : {ProbeKind::kNone, ProbeKind::kCuda, ProbeKind::kRocm, ProbeKind::kTpu})
    if (probe_kind_name(k) == name) return k;
  return invalid_argument("unknown probe '" + std::string(name) + "' (expected none, cuda, rocm or tpu)");
}

}  // namespace plugboard::select
