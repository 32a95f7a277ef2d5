// What the device probes of the platform folders look at, shared: device nodes under a folder, and the
// visibility variables a vendor runtime reads (CUDA_VISIBLE_DEVICES="" hides every device).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "platforms/platform.h"

namespace plugboard::platforms {

// The entries of `dir` whose names start with `prefix` and continue with a digit (nvidia0, not
// nvidiactl); an empty prefix takes every name that starts with a digit. A missing folder has none.
std::vector<std::string> numbered_nodes(const std::filesystem::path& dir, const std::string& prefix);

bool node_exists(const std::filesystem::path& path);

// Why `variable` hides every device (set and empty, "-1" or "NoDevFiles", as CUDA reads it); nullopt
// when it does not.
std::optional<std::string> hides_every_device(const ProbeInputs& inputs, const std::string& variable);

ProbeResult unavailable(std::string why);

}  // namespace plugboard::platforms
