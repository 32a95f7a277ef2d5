#include "select/probe.h"

#include <cstdlib>

#include "platforms/registry.h"

namespace plugboard::select {

ProbeEnvironment ProbeEnvironment::from_process() {
  ProbeEnvironment env;
  // The visibility variables (CUDA_VISIBLE_DEVICES, ...) are the vendor runtime's, read as it reads
  // them (getenv: set-and-empty hides every device); they can only rule a target out, never add one.
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  // As the loader does in secure mode: a setuid/setgid process does not search LD_LIBRARY_PATH.
  if (const char* lp = ::secure_getenv("LD_LIBRARY_PATH")) env.resolve.ld_library_path = lp;
  return env;
}

ProbeResult probe(ProbeKind kind, const ProbeEnvironment& env) {
  platforms::ProbeInputs inputs;
  inputs.dev_root = env.dev_root;
  inputs.getenv = env.getenv;
  // A driver library is found where the loader would find it (elf_dependencies.h).
  inputs.find_library = [&env](const std::string& name) { return find_system_library(name, env.resolve); };
  return platforms::probe(kind, inputs);
}

}  // namespace plugboard::select
