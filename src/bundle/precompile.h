// Programs compiled into a bundle (plugboard bundle --precompile): for each target that can compile
// here, each program is compiled with the default compile options (JAX's numerics) and stored as a
// compile-cache entry at compiled/<target>/<key>.pbx, listed in the manifest with its size and sha256.
// At boot the chosen target's client finds them by key (src/compile_cache/cached_compile.h).
//
// Which targets compile here: CPU ones always (a client of their plugin); a GPU target given a
// device topology (its plugin's PJRT_TopologyDescription_Create options, e.g. CUDA's "topology" and
// "target_config") compiles for that topology with no device present. Every other target (ROCm, TPU,
// a GPU without a topology, a plugin that does not load here) is left as it was, with the reason.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "plugin/plugin.h"

namespace plugboard::bundle {

struct PrecompileRequest {
  std::vector<std::filesystem::path> programs;
  // Per target name: the create options of a device topology to compile for without its devices.
  std::map<std::string, std::vector<NamedValue>> topologies;
};

struct PrecompileOutcome {
  std::string target;
  std::vector<std::string> programs;  // "softmax.mlir (12.3 ms, 45 KiB)"
  std::optional<Error> skipped;       // why the target was not precompiled
};

// FAILED_PRECONDITION naming the target when a program does not compile for a target that can
// compile here; errors naming the file for a program that cannot be read. The bundle is locked
// while its manifest is updated; entries are written atomically before the manifest names them.
Expected<std::vector<PrecompileOutcome>> precompile_bundle(const std::filesystem::path& dir,
                                                           const PrecompileRequest& request) noexcept;

// The CUDA topology options for a text GpuTargetConfigProto: {"topology": "1x1x1", "target_config": text}.
std::vector<NamedValue> gpu_topology_options(std::string target_config_text);

}  // namespace plugboard::bundle
