// Device probes: cheap checks, made without loading a plugin, that rule a target out on a machine that
// cannot run it — so a 400 MB CUDA plugin is never mapped on a machine without a GPU. A probe looks only
// at the environment (CUDA_VISIBLE_DEVICES="" and the like), device nodes (/dev/nvidia*, /dev/kfd,
// /dev/dri/renderD*, /dev/accel*, /dev/vfio) and whether the driver library can be resolved
// (libcuda.so.1). It errs on the side of "available": the later stages still have the last word.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "select/candidate.h"
#include "select/elf_dependencies.h"

namespace plugboard::select {

struct ProbeEnvironment {
  std::filesystem::path dev_root = "/dev";  // tests point it at a folder of their own
  // Reads an environment variable; default: ::getenv.
  std::function<std::optional<std::string>(const std::string&)> getenv;
  ResolveOptions resolve;  // where a driver library is looked for
  static ProbeEnvironment from_process();
};

struct ProbeResult {
  bool available = true;
  std::string reason;  // why not, naming the variable, node or library; or what was found
};

ProbeResult probe(ProbeKind kind, const ProbeEnvironment& env);

}  // namespace plugboard::select
