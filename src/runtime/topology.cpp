#include "runtime/topology.h"

#include "abi/api.h"
#include "base/no_throw.h"
#include "runtime/device_kind.h"
#include "runtime/executable_internal.h"
#include "runtime/named_values.h"

namespace plugboard {

Expected<std::unique_ptr<Topology>> Topology::create(std::shared_ptr<const Plugin> plugin,
                                                     const std::vector<NamedValue>& options) noexcept {
  return no_throw("describing a topology", [&]() -> Expected<std::unique_ptr<Topology>> {
    const abi::Api& api = plugin->api();
    const std::string doing = "describing a device topology with " + plugin->path().string();
    std::vector<PJRT_NamedValue> named = internal::to_pjrt(options);
    auto args = PB_PJRT_ARGS(PJRT_TopologyDescription_Create_Args);
    args.create_options = named.data();
    args.num_options = named.size();
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_TopologyDescription_Create, args), doing));
    if (!args.topology) return make_error(Code::kInternal, doing + ": the plugin handed back no topology");
    std::unique_ptr<Topology> t(new Topology());
    t->plugin_ = std::move(plugin);
    t->topology_ = args.topology;  // owned from here

    auto name = PB_PJRT_ARGS(PJRT_TopologyDescription_PlatformName_Args);
    name.topology = t->topology_;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_TopologyDescription_PlatformName, name), doing));
    t->platform_name_.assign(abi::view(name.platform_name, name.platform_name_size));

    auto devices = PB_PJRT_ARGS(PJRT_TopologyDescription_GetDeviceDescriptions_Args);
    devices.topology = t->topology_;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_TopologyDescription_GetDeviceDescriptions, devices), doing));
    if (devices.num_descriptions > 0 && !devices.descriptions)
      return make_error(Code::kInternal, doing + ": the plugin handed back a device count but no devices");
    for (size_t i = 0; i < devices.num_descriptions; ++i) {
      PB_ASSIGN_OR_RETURN(std::string kind, annotate(internal::device_kind(api, devices.descriptions[i]), doing));
      t->device_kinds_.push_back(std::move(kind));
    }
    return t;
  });
}

Topology::~Topology() {
  if (!topology_) return;
  auto args = PB_PJRT_ARGS(PJRT_TopologyDescription_Destroy_Args);
  args.topology = topology_;
  (void)PB_PJRT_CALL(plugin_->api(), PJRT_TopologyDescription_Destroy, args);
}

Expected<std::string> Topology::compile_serialized(const Program& program, const CompileOptions& options) const noexcept {
  return no_throw("compiling for a topology", [&]() -> Expected<std::string> {
    const abi::Api& api = plugin_->api();
    const std::string doing = "compiling " + program.name() + " for a " + platform_name_ + " topology with " +
                              plugin_->path().string() + " (no device)";
    const std::string serialized = options.serialize();
    PJRT_Program pjrt_program = internal::pjrt_program_of(program);
    auto args = PB_PJRT_ARGS(PJRT_Compile_Args);
    args.topology = topology_;
    args.program = &pjrt_program;
    args.compile_options = serialized.data();
    args.compile_options_size = serialized.size();
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Compile, args), doing));
    if (!args.executable) return make_error(Code::kInternal, doing + ": PJRT_Compile handed back no executable");
    internal::UnloadedExecutable exe(api, args.executable);
    return annotate(internal::serialize(api, exe.get()), doing);
  });
}

}  // namespace plugboard
