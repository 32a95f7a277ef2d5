// A device topology described without the devices (PJRT_TopologyDescription_Create): what a plugin
// compiles for when no device is present. The CUDA plugin (PJRT 0.116) compiles this way on a machine
// with no GPU when given create options {"topology": "1x1x1" (partitions x hosts x devices),
// "target_config": a text GpuTargetConfigProto}; the CPU plugins answer "Topology not supported for
// CPU compilation".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "plugin/plugin.h"
#include "runtime/compile_options.h"
#include "runtime/program.h"

extern "C" struct PJRT_TopologyDescription;

namespace plugboard {

class Topology {
 public:
  // The plugin's error (e.g. "No visible GPU devices", "Cannot create topology without an explicit
  // topology shape or without a client") comes back as a value, naming the plugin.
  static Expected<std::unique_ptr<Topology>> create(std::shared_ptr<const Plugin> plugin,
                                                    const std::vector<NamedValue>& options) noexcept;
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  const std::string& platform_name() const { return platform_name_; }
  // Each device's kind ("NVIDIA H200"), in the topology's order.
  const std::vector<std::string>& device_kinds() const { return device_kinds_; }
  const Plugin& plugin() const { return *plugin_; }

  // PJRT_Compile against this topology, then PJRT_Executable_Serialize: bytes that a client of the
  // same plugin build on such a device loads with Client::load_serialized.
  Expected<std::string> compile_serialized(const Program& program, const CompileOptions& options) const noexcept;

 private:
  Topology() = default;
  std::shared_ptr<const Plugin> plugin_;
  PJRT_TopologyDescription* topology_ = nullptr;
  std::string platform_name_;
  std::vector<std::string> device_kinds_;
};

}  // namespace plugboard
