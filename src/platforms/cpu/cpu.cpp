// The CPU: nothing to probe (the host is always there), the lowest priority (any accelerator that
// starts is preferred), and host callbacks straight on the host ("Host" FFI platform, no bridge).
#include "platforms/cpu/cpu.h"

namespace plugboard::platforms {

PlatformTraits cpu_platform() {
  PlatformTraits t;
  t.name = "cpu";
  t.priority = 10;
  t.name_patterns = {"cpu"};
  t.client_platform_names = {"cpu", "host"};
  t.callbacks = CallbackPath{"Host", std::nullopt};
  t.buffers_in_host_memory = true;
  return t;
}

}  // namespace plugboard::platforms
