// AMD GPUs through the ROCm plugin. The probe: neither HIP_VISIBLE_DEVICES nor ROCR_VISIBLE_DEVICES
// hiding every device, the kernel driver node /dev/kfd and a render node /dev/dri/renderD*. Host
// callbacks have no path here yet.
#include "platforms/rocm/rocm.h"

#include "platforms/device_nodes.h"

namespace plugboard::platforms {
namespace {

ProbeResult probe_rocm(const ProbeInputs& in) {
  for (const char* var : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})
    if (auto why = hides_every_device(in, var)) return unavailable(*why);
  if (!node_exists(in.dev_root / "kfd")) return unavailable("no AMD kernel driver node (" + (in.dev_root / "kfd").string() + ")");
  auto render = numbered_nodes(in.dev_root / "dri", "renderD");
  if (render.empty()) return unavailable("no GPU render node (" + (in.dev_root / "dri/renderD*").string() + ")");
  return {true, (in.dev_root / "kfd").string() + " and " + std::to_string(render.size()) + " render node(s)"};
}

}  // namespace

PlatformTraits rocm_platform() {
  PlatformTraits t;
  t.name = "rocm";
  t.priority = 90;
  t.probe = ProbeKind::kRocm;
  t.run_probe = probe_rocm;
  t.name_patterns = {"rocm"};
  t.client_platform_names = {"rocm"};
  return t;
}

}  // namespace plugboard::platforms
