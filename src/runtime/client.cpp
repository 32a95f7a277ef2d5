#include "runtime/client.h"
#include "runtime/traced_event.h"

#include <cstdlib>
#include <cstring>

#include "base/no_throw.h"
#include "distributed/pjrt_key_value.h"
#include "abi/api.h"
#include "platforms/registry.h"
#include "plugin/plugin_output.h"
#include "runtime/executable_internal.h"
#include "runtime/create_option_rules.h"
#include "runtime/device_kind.h"
#include "runtime/execute_context.h"
#include "runtime/named_values.h"
#include "runtime/plugin_profiler.h"

namespace plugboard {
namespace {

Expected<DeviceInfo> describe(const abi::Api& api, PJRT_Device* device) {
  DeviceInfo info;
  auto get = PB_PJRT_ARGS(PJRT_Device_GetDescription_Args);
  get.device = device;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Device_GetDescription, get));
  PB_RETURN_IF_ERROR(plugin_output::non_null(api, "PJRT_Device_GetDescription", "device_description", get.device_description));
  auto id = PB_PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
  id.device_description = get.device_description;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_DeviceDescription_Id, id));
  info.id = id.id;
  if (auto kind = internal::device_kind(api, get.device_description)) info.kind = std::move(*kind);
  auto debug = PB_PJRT_ARGS(PJRT_DeviceDescription_DebugString_Args);
  debug.device_description = get.device_description;
  if (PB_PJRT_CALL(api, PJRT_DeviceDescription_DebugString, debug))
    info.description.assign(abi::view(debug.debug_string, debug.debug_string_size));
  auto str = PB_PJRT_ARGS(PJRT_DeviceDescription_ToString_Args);
  str.device_description = get.device_description;
  if (PB_PJRT_CALL(api, PJRT_DeviceDescription_ToString, str))
    info.display.assign(abi::view(str.to_string, str.to_string_size));
  auto hw = PB_PJRT_ARGS(PJRT_Device_LocalHardwareId_Args);
  hw.device = device;
  if (PB_PJRT_CALL(api, PJRT_Device_LocalHardwareId, hw)) info.local_hardware_id = hw.local_hardware_id;
  return info;
}

// The create options with the job's node_id / num_nodes added when given.
Expected<std::vector<NamedValue>> with_node_options(const ClientOptions& options) {
  std::vector<NamedValue> all = options.create_options;
  auto add = [&](const char* name, const std::optional<int64_t>& value) -> Status {
    if (!value) return ok();
    for (const NamedValue& o : all)
      if (o.name == name)
        return invalid_argument(std::string("create option '") + name + "' given twice: in create_options and as ClientOptions::" + name);
    all.push_back({name, *value});
    return ok();
  };
  if (options.num_nodes && *options.num_nodes < 1)
    return invalid_argument("ClientOptions::num_nodes must be at least 1, not " + std::to_string(*options.num_nodes));
  if (options.node_id && (*options.node_id < 0 || (options.num_nodes && *options.node_id >= *options.num_nodes)))
    return invalid_argument("ClientOptions::node_id " + std::to_string(*options.node_id) + " is outside [0, num_nodes" +
                            (options.num_nodes ? " = " + std::to_string(*options.num_nodes) : std::string()) + ")");
  PB_RETURN_IF_ERROR(add("node_id", options.node_id));
  PB_RETURN_IF_ERROR(add("num_nodes", options.num_nodes));
  return all;
}

}  // namespace

Expected<std::shared_ptr<Client>> Client::create(std::shared_ptr<const Plugin> plugin, const ClientOptions& options) noexcept {
  return no_throw("creating a client", [&]() -> Expected<std::shared_ptr<Client>> {
    if (!plugin) return invalid_argument("Client::create: no plugin given");
    const abi::Api& api = plugin->api();
    const std::string doing = "creating a client of " + plugin->path().string();

    PB_ASSIGN_OR_RETURN(std::vector<NamedValue> create_options, annotate(with_node_options(options), doing));
    PB_RETURN_IF_ERROR(check_create_options(create_options, plugin->path().string()));
    std::vector<PJRT_NamedValue> named = internal::to_pjrt(create_options);
    auto args = PB_PJRT_ARGS(PJRT_Client_Create_Args);
    args.create_options = named.data();
    args.num_options = named.size();
    if (options.kv_store) distributed::attach_key_value_store(args, options.kv_store.get(), plugin->version().minor);
    // A refusal names the options the plugin was given (one it does not know, or a value it will not take).
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Client_Create, args),
                                create_options.empty() ? doing : doing + " with " + describe_create_options(create_options)));

    if (!args.client)
      return std::unexpected(plugin_output::bad_output(api, "PJRT_Client_Create", "a null client without an error"));
    std::shared_ptr<Client> client(new Client());
    client->plugin_ = std::move(plugin);
    client->client_ = args.client;  // owned from here: ~Client destroys it on any early return
    client->kv_store_ = options.kv_store;

    auto name = PB_PJRT_ARGS(PJRT_Client_PlatformName_Args);
    name.client = client->client_;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Client_PlatformName, name), doing));
    client->platform_name_.assign(abi::view(name.platform_name, name.platform_name_size));

    auto version = PB_PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
    version.client = client->client_;
    if (PB_PJRT_CALL(api, PJRT_Client_PlatformVersion, version))
      client->platform_version_.assign(abi::view(version.platform_version, version.platform_version_size));

    auto devices = PB_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
    devices.client = client->client_;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Client_AddressableDevices, devices), doing));
    // The list and every device in it are the plugin's word: checked before they are read or passed on.
    PB_ASSIGN_OR_RETURN(std::span<PJRT_Device* const> listed,
                        annotate(plugin_output::list(api, "PJRT_Client_AddressableDevices", "addressable_devices",
                                                     static_cast<PJRT_Device* const*>(devices.addressable_devices),
                                                     devices.num_addressable_devices),
                                 doing));
    for (size_t i = 0; i < listed.size(); ++i) {
      PB_ASSIGN_OR_RETURN(PJRT_Device * d, annotate(plugin_output::non_null(api, "PJRT_Client_AddressableDevices",
                                                                           "device " + std::to_string(i), listed[i]),
                                                    doing));
      PB_ASSIGN_OR_RETURN(DeviceInfo info, annotate(describe(api, d), doing + ": describing device " + std::to_string(i)));
      info.trace_track = trace::named_track("device " + std::to_string(i) + " (" + info.kind + ")");
      client->devices_.push_back(std::move(info));
      client->device_handles_.push_back(d);
    }
    plugin_profiler::client_made(client->plugin_);  // its own profiler joins a trace (plugin_profiler.h)
    return client;
  });
}

Client::~Client() {
  if (!client_) return;
  auto args = PB_PJRT_ARGS(PJRT_Client_Destroy_Args);
  args.client = client_;
  (void)PB_PJRT_CALL(plugin_->api(), PJRT_Client_Destroy, args);
}

Expected<PJRT_ExecuteContext*> Client::empty_execute_context() const {
  if (PJRT_ExecuteContext* shared = plugin_->shared_empty_context()) return shared;
  PB_ASSIGN_OR_RETURN(ExecuteContext made, ExecuteContext::create(*this));
  PJRT_ExecuteContext* in_use = plugin_->install_shared_empty_context(made.raw());
  if (in_use == made.raw()) made.release();  // kept for the life of the process
  return in_use;                              // else `made` lost the race and is destroyed here
}

std::string Client::label() const { return plugin_->path().filename().string() + " (" + platform_name_ + ")"; }

Status Client::check_array(size_t bytes, DType dtype, std::span<const int64_t> dims, int device_index) const {
  if (dtype_size(dtype) == 0) return invalid_argument("unsupported dtype " + dtype_name(dtype));
  auto shown = [&] { return shape_string(dtype, std::vector<int64_t>(dims.begin(), dims.end())); };
  auto needed = byte_size(dtype, dims);
  if (!needed) return std::unexpected(std::move(needed).error().annotate("invalid dimensions " + shown()));
  if (*needed != bytes)
    return invalid_argument(shown() + " needs " + std::to_string(*needed) + " bytes, " + std::to_string(bytes) +
                            " given");
  if (device_index < 0 || static_cast<size_t>(device_index) >= device_handles_.size())
    return invalid_argument("device index " + std::to_string(device_index) + " out of range: " + label() + " has " +
                            std::to_string(device_handles_.size()) + " device(s)");
  return ok();
}

Expected<Buffer> Client::transfer(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                                  int device_index, int semantics, Event& done) const {
  PB_RETURN_IF_ERROR(check_array(data.size(), dtype, dims, device_index));
  trace::Scope span("copy_to_device", "transfer");
  span.arg("bytes", static_cast<int64_t>(data.size())).arg("device", device_index);
  const abi::Api& api = plugin_->api();
  auto args = PB_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client_;
  args.data = data.data();
  args.type = abi::to_pjrt(dtype);
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = static_cast<PJRT_HostBufferSemantics>(semantics);
  args.device = device_handles_[static_cast<size_t>(device_index)];
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Client_BufferFromHostBuffer, args));
  done = Event(shared_from_this(), args.done_with_host_buffer);
  Buffer buffer(shared_from_this(), args.buffer, dtype, Dims(dims), device_index);
  if (span)  // on the device's track: from the call until the buffer is ready there
    if (auto ready = buffer.ready_event())
      finish_when_ready(*ready, std::move(trace::Deferred("copy_to_device", "device", span.start_ns())
                                              .arg("bytes", static_cast<int64_t>(data.size()))),
                        devices_[static_cast<size_t>(device_index)].trace_track);
  return buffer;
}

Expected<Buffer> Client::buffer_from_host(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                                          int device_index) const noexcept {
  return no_throw("copying to the device", [&]() -> Expected<Buffer> {
    // With kImmutableOnlyDuringCall the plugin is done with `data` on return; the event is only freed.
    Event done;
    return transfer(data, dtype, dims, device_index, PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, done);
  });
}

Expected<Buffer> Client::buffer_from_host_pooled(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                                                 int device_index) const noexcept {
  return no_throw("copying to the device through warm host memory", [&]() -> Expected<Buffer> {
    const platforms::PlatformTraits* platform = platforms::platform_for_client(platform_name_);
    if (!platform || !platform->buffers_in_host_memory) return buffer_from_host(data, dtype, dims, device_index);
    PB_RETURN_IF_ERROR(check_array(data.size(), dtype, dims, device_index));
    auto acquired = host_pool_->acquire(data.size());
    if (!acquired)  // the message is built only on failure: this is every pooled copy's path
      return std::unexpected(std::move(acquired).error().annotate(
          "a host block for " + std::to_string(data.size()) + " bytes to copy to " + label()));
    std::shared_ptr<std::byte> block = std::move(*acquired);
    if (!data.empty()) std::memcpy(block.get(), data.data(), data.size());
    const std::span<const std::byte> copied(block.get(), data.size());
    return buffer_from_host_adopt(copied, std::move(block), HostMemory::kMutable, dtype, dims, device_index);
  });
}

Expected<Buffer> Client::buffer_from_host_adopt(std::span<const std::byte> data, std::shared_ptr<const void> keep_alive,
                                                HostMemory memory, DType dtype, std::span<const int64_t> dims,
                                                int device_index) const noexcept {
  return no_throw("adopting host memory", [&]() -> Expected<Buffer> {
    const platforms::PlatformTraits* platform = platforms::platform_for_client(platform_name_);
    const bool zero_copy = platform && platform->buffers_in_host_memory &&
                           reinterpret_cast<uintptr_t>(data.data()) % 64 == 0;
    const bool immutable = memory == HostMemory::kImmutable;
    const int semantics = !zero_copy  ? PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes
                          : immutable ? PJRT_HostBufferSemantics_kImmutableZeroCopy
                                      : PJRT_HostBufferSemantics_kMutableZeroCopy;
    Event done;
    PB_ASSIGN_OR_RETURN(Buffer buffer, transfer(data, dtype, dims, device_index, semantics, done));
    // A copy made from immutable memory may be donated: only a view of it may not.
    if (immutable && zero_copy) buffer.view_ = BufferView::kImmutableHost;
    // The memory must live until the plugin says it is done with it: for zero-copy, that is when the
    // last user of the device buffer (this one, or an output aliasing it) is gone.
    if (!done.empty()) {
      if (auto registered = done.on_ready([keep = std::move(keep_alive)](Status) mutable { keep.reset(); });
          !registered) {
        buffer.reset();  // release the device buffer before the memory under it
        return std::unexpected(std::move(registered).error());
      }
    }
    return buffer;
  });
}

Expected<DeviceMemoryStats> Client::memory_stats(int device_index) const noexcept {
  return no_throw("reading device memory figures", [&]() -> Expected<DeviceMemoryStats> {
    if (device_index < 0 || static_cast<size_t>(device_index) >= device_handles_.size())
      return invalid_argument("device index " + std::to_string(device_index) + " out of range: " + label() + " has " +
                              std::to_string(device_handles_.size()) + " device(s)");
    const abi::Api& api = plugin_->api();
    if (!PB_PJRT_HAS(api, PJRT_Device_MemoryStats))
      return make_error(Code::kUnimplemented, label() + " has no PJRT_Device_MemoryStats");
    auto args = PB_PJRT_ARGS(PJRT_Device_MemoryStats_Args);
    args.device = device_handles_[static_cast<size_t>(device_index)];
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Device_MemoryStats, args),
                                "memory figures of device " + std::to_string(device_index) + " of " + label()));
    DeviceMemoryStats stats;
    stats.bytes_in_use = args.bytes_in_use;
    auto set = [](bool is_set, int64_t v) { return is_set ? std::optional<int64_t>(v) : std::nullopt; };
    stats.peak_bytes_in_use = set(args.peak_bytes_in_use_is_set, args.peak_bytes_in_use);
    stats.bytes_limit = set(args.bytes_limit_is_set, args.bytes_limit);
    stats.num_allocs = set(args.num_allocs_is_set, args.num_allocs);
    stats.largest_alloc_size = set(args.largest_alloc_size_is_set, args.largest_alloc_size);
    return stats;
  });
}

Expected<std::shared_ptr<Executable>> Client::compile(const Program& program, const CompileOptions& options) const noexcept {
  return no_throw("compiling", [&]() -> Expected<std::shared_ptr<Executable>> {
    return internal::compile(shared_from_this(), program, options);
  });
}

Expected<std::shared_ptr<Executable>> Client::load_serialized(std::string_view serialized, bool portable,
                                                              const std::string& what, const Description* known) const noexcept {
  return no_throw("loading a serialized executable", [&]() -> Expected<std::shared_ptr<Executable>> {
    return internal::deserialize(shared_from_this(), serialized, portable, what, known);
  });
}

}  // namespace plugboard
