#include "select/probe.h"

#include <cstdlib>
#include <system_error>

namespace plugboard::select {
namespace {

// The device nodes in `dir` whose names start with `prefix` and continue with a digit (nvidia0, not
// nvidiactl), or any that start with `prefix` when digits_only is false.
std::vector<std::string> nodes(const std::filesystem::path& dir, const std::string& prefix, bool digits_only) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (digits_only && (name.size() == prefix.size() || !std::isdigit(static_cast<unsigned char>(name[prefix.size()]))))
      continue;
    out.push_back(name);
  }
  return out;
}

bool node_exists(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

// A visibility variable that hides every device: set and empty, or "-1" / "NoDevFiles" as CUDA reads it.
std::optional<std::string> hides_all(const ProbeEnvironment& env, const std::string& var) {
  if (!env.getenv) return std::nullopt;
  std::optional<std::string> v = env.getenv(var);
  if (!v) return std::nullopt;
  if (v->empty() || *v == "-1" || *v == "NoDevFiles") return var + "=\"" + *v + "\" hides every device";
  return std::nullopt;
}

ProbeResult unavailable(std::string why) { return {false, std::move(why)}; }

ProbeResult probe_cuda(const ProbeEnvironment& env) {
  if (auto why = hides_all(env, "CUDA_VISIBLE_DEVICES")) return unavailable(*why);
  auto gpus = nodes(env.dev_root, "nvidia", true);
  if (gpus.empty())
    return unavailable("no NVIDIA GPU device node (" + (env.dev_root / "nvidia[0-9]*").string() + ")");
  auto driver = find_system_library("libcuda.so.1", env.resolve);
  if (!driver) return unavailable("the NVIDIA driver library libcuda.so.1 is not on the loader's path");
  return {true, std::to_string(gpus.size()) + " GPU node(s) in " + env.dev_root.string() + ", driver " + driver->string()};
}

ProbeResult probe_rocm(const ProbeEnvironment& env) {
  for (const char* var : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})
    if (auto why = hides_all(env, var)) return unavailable(*why);
  if (!node_exists(env.dev_root / "kfd")) return unavailable("no AMD kernel driver node (" + (env.dev_root / "kfd").string() + ")");
  auto render = nodes(env.dev_root / "dri", "renderD", true);
  if (render.empty()) return unavailable("no GPU render node (" + (env.dev_root / "dri/renderD*").string() + ")");
  return {true, (env.dev_root / "kfd").string() + " and " + std::to_string(render.size()) + " render node(s)"};
}

ProbeResult probe_tpu(const ProbeEnvironment& env) {
  if (auto why = hides_all(env, "TPU_VISIBLE_CHIPS")) return unavailable(*why);
  auto accel = nodes(env.dev_root, "accel", true);
  auto vfio = nodes(env.dev_root / "vfio", "", true);
  if (accel.empty() && vfio.empty())
    return unavailable("no TPU device node (" + (env.dev_root / "accel*").string() + ", " +
                       (env.dev_root / "vfio/*").string() + ")");
  return {true, std::to_string(accel.size() + vfio.size()) + " TPU device node(s)"};
}

}  // namespace

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
  switch (kind) {
    case ProbeKind::kNone: return {true, "no probe needed"};
    case ProbeKind::kCuda: return probe_cuda(env);
    case ProbeKind::kRocm: return probe_rocm(env);
    case ProbeKind::kTpu: return probe_tpu(env);
  }
  return {true, ""};
}

}  // namespace plugboard::select
