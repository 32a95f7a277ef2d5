// Whether a bundle target's precompiled programs can load on this machine, as far as the manifest
// says (each program's "built_on", manifest.h): a CPU program's key holds the processor that compiled
// it and every program's holds XLA_FLAGS, so on another processor, or under other XLA_FLAGS, the
// entries are never found and each program is compiled again on first use. The boot report says so
// (the candidate's precompiled_mismatch) rather than leaving it to a slow first request.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bundle/manifest.h"
#include "compile_cache/host_cpu.h"

namespace plugboard::bundle {

// Why `entry`'s precompiled programs will not load here, as a sentence for the report; empty when
// nothing says they will not (no "built_on": a bundle made before it records nothing). `here` is this
// machine's processor (nullopt: it cannot be identified, and the cache is not used for CPU programs);
// `xla_flags_here` the process's XLA_FLAGS.
std::string precompiled_mismatch(const TargetEntry& entry, const std::optional<compile_cache::HostCpu>& here,
                                 std::string_view xla_flags_here);

// The same for this machine and process.
std::string precompiled_mismatch_here(const TargetEntry& entry);

}  // namespace plugboard::bundle
