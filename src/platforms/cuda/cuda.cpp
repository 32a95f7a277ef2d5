// NVIDIA GPUs through the CUDA plugin. The probe: no visibility variable hiding every device, a GPU
// node (/dev/nvidia0, not /dev/nvidiactl) and the driver library libcuda.so.1 on the loader's path.
// Host callbacks register under "CUDA" and move operands through the CUDA bridge (bridge/).
#include "platforms/cuda/cuda.h"

#include "platforms/bridge_file.h"
#include "platforms/device_nodes.h"

namespace plugboard::platforms {
namespace {

ProbeResult probe_cuda(const ProbeInputs& in) {
  if (auto why = hides_every_device(in, "CUDA_VISIBLE_DEVICES")) return unavailable(*why);
  auto gpus = numbered_nodes(in.dev_root, "nvidia");
  if (gpus.empty())
    return unavailable("no NVIDIA GPU device node (" + (in.dev_root / "nvidia[0-9]*").string() + ")");
  auto driver = in.find_library ? in.find_library("libcuda.so.1") : std::nullopt;
  if (!driver) return unavailable("the NVIDIA driver library libcuda.so.1 is not on the loader's path");
  return {true, std::to_string(gpus.size()) + " GPU node(s) in " + in.dev_root.string() + ", driver " + driver->string()};
}

}  // namespace

PlatformTraits cuda_platform() {
  PlatformTraits t;
  t.name = "cuda";
  t.priority = 100;
  t.probe = ProbeKind::kCuda;
  t.run_probe = probe_cuda;
  t.name_patterns = {"cuda"};
  t.client_platform_names = {"cuda", "gpu"};
  t.callbacks = CallbackPath{"CUDA", device_bridge_file("CUDA", "build plugboard with nvcc")};
  return t;
}

}  // namespace plugboard::platforms
