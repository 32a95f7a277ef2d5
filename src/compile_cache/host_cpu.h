// This machine's processor as the compile cache keys CPU executables by it: the model and feature flags
// that /proc/cpuinfo gives for the first processor (x86's "model name" and "flags"; Arm's "CPU
// implementer", "CPU architecture", "CPU variant", "CPU part" and "Features"), and their digest.
//
// XLA's CPU compiler emits code for the host that compiles (the host's CPU name and every feature
// LLVM finds), so an executable compiled on one processor is not loaded on another: its key differs.
// Portability: the CPU plugins (0.81, 0.106 and 0.115 all carry it in their strings) read
// DebugOptions.xla_cpu_max_isa ("Maximum ISA that XLA:CPU LLVM backend will codegen": SSE4_2, AVX,
// AVX2, AVX512, AVX512_VNNI, AVX512_BF16, AMX, AMX_FP16), which caps the instructions the compiler
// emits; it does not change the CPU the code is tuned for, and the executable does not record the cap
// (a loader cannot check it against the host). plugboard does not use it: keys stay per
// processor, and a bundle records the processor its programs were compiled on (manifest "built_on")
// so that a boot on another processor says so in its report (bundle/precompiled_host.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace plugboard::compile_cache {

struct HostCpu {
  std::string digest;               // sha256 of the lines picked: what the cache key holds
  std::string model;                // "Intel(R) Xeon(R) Platinum 8480+"; Arm: "implementer 0x41 part 0xd0c"
  std::vector<std::string> flags;   // "fpu", "avx2", ... (x86's flags, Arm's Features), as listed
};

// What `cpuinfo` (the text of /proc/cpuinfo) says about its first processor; an empty digest when it
// names none of the fields.
HostCpu parse_cpuinfo(std::string_view cpuinfo);

// This machine's, read once; UNAVAILABLE when /proc/cpuinfo names no processor.
Expected<HostCpu> this_host_cpu();

// What differs between the processor a program was compiled on and this one, for a report:
// "built on \"A\", this host is \"B\"; features there, not here: avx512f, ...; here, not there: ...".
// Empty when the digests are equal.
std::string describe_cpu_difference(const HostCpu& built_on, const HostCpu& here);

}  // namespace plugboard::compile_cache
