// The one table of platforms plugboard knows (platform.h), and the look-ups every layer makes in it.
// Adding a platform is a folder of its own (its probe, patterns, priority, callback path, known
// packages) and one entry in platforms() (registry.cpp), plus its ProbeKind when it has a probe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "platforms/platform.h"

namespace plugboard::platforms {

// In the order their name patterns are tried: the accelerators first, CPU last ("cpu" is a common word).
const std::vector<PlatformTraits>& platforms();

// By name ("cuda"); null when plugboard knows no such platform.
const PlatformTraits* find_platform(std::string_view name);
// The platform whose probe `kind` is; null for ProbeKind::kNone.
const PlatformTraits* platform_for_probe(ProbeKind kind);
// The platform of a client that reports `platform_name` ("cpu", "CUDA", "gpu"), in any case; or null.
const PlatformTraits* platform_for_client(std::string_view platform_name);
// The first platform one of whose patterns occurs in `text` (ASCII letters compared in any case); or null.
const PlatformTraits* platform_named_in(std::string_view text);
// The platform whose host callbacks register under `ffi_platform` ("CUDA", in any case); or null.
const PlatformTraits* platform_for_ffi(std::string_view ffi_platform);

// "none", or the name of the platform whose probe it is ("cuda", "rocm", "tpu").
std::string probe_kind_name(ProbeKind kind);
Expected<ProbeKind> parse_probe_kind(std::string_view name);

// Runs the probe `kind` (kNone: always available).
ProbeResult probe(ProbeKind kind, const ProbeInputs& inputs);

}  // namespace plugboard::platforms
