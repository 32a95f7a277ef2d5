// Device probes: cheap checks, made without loading a plugin, that rule a target out on a machine that
// cannot run it — so a 400 MB CUDA plugin is never mapped on a machine without a GPU. Each platform's
// probe lives in its folder (src/platforms/<platform>/); this is where selection runs them, on the
// process's environment or a test's. A probe looks only at the environment (CUDA_VISIBLE_DEVICES=""
// and the like), device nodes and whether a driver library can be resolved. It errs on the side of
// "available": the later stages still have the last word.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "platforms/platform.h"
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

using platforms::ProbeResult;

ProbeResult probe(ProbeKind kind, const ProbeEnvironment& env);

}  // namespace plugboard::select
