// Google TPUs through libtpu. The probe: TPU_VISIBLE_CHIPS not hiding every chip and a TPU device node
// (/dev/accel* or /dev/vfio/*). The probe is mandatory: libtpu's start-up reaches for
// cloud metadata and can hang on a machine without a TPU, so it is never loaded without its probe
// passing, nor loaded to be bundled. Its priority is above the GPUs'.
#include "platforms/tpu/tpu.h"

#include "platforms/device_nodes.h"

namespace plugboard::platforms {
namespace {

ProbeResult probe_tpu(const ProbeInputs& in) {
  if (auto why = hides_every_device(in, "TPU_VISIBLE_CHIPS")) return unavailable(*why);
  auto accel = numbered_nodes(in.dev_root, "accel");
  auto vfio = numbered_nodes(in.dev_root / "vfio", "");
  if (accel.empty() && vfio.empty())
    return unavailable("no TPU device node (" + (in.dev_root / "accel*").string() + ", " +
                       (in.dev_root / "vfio/*").string() + ")");
  return {true, std::to_string(accel.size() + vfio.size()) + " TPU device node(s)"};
}

}  // namespace

PlatformTraits tpu_platform() {
  PlatformTraits t;
  t.name = "tpu";
  t.priority = 110;
  t.probe = ProbeKind::kTpu;
  t.run_probe = probe_tpu;
  t.probe_mandatory = true;
  t.name_patterns = {"tpu"};
  t.client_platform_names = {"tpu"};
  return t;
}

}  // namespace plugboard::platforms
