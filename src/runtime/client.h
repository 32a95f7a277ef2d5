// A PJRT client of one plugin: its devices, buffers made from host memory, and compilation.
// Always held by shared_ptr; buffers and executables keep it alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/trace.h"
#include "base/host_block_pool.h"
#include "base/status.h"
#include "plugboard/key_value_store.h"
#include "plugin/plugin.h"
#include "runtime/buffer.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "runtime/pjrt_handles.h"
#include "runtime/program.h"

namespace plugboard {

struct DeviceInfo {
  int id = 0;
  int local_hardware_id = -1;
  std::string kind;         // "cpu", "NVIDIA H200", ...
  std::string description;  // the plugin's DebugString
  std::string display;      // the plugin's ToString
  trace::Track trace_track = 0;  // its track in traces: "device 0 (cpu)"
};

// What an adopted buffer's device may do to the host memory under it (buffer_from_host_adopt).
enum class HostMemory { kMutable, kImmutable };

// What the plugin reports of a device's memory (PJRT_Device_MemoryStats); a field it does not set is
// nullopt, and a plugin without the call reports nothing.
struct DeviceMemoryStats {
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use;
  std::optional<int64_t> bytes_limit;
  std::optional<int64_t> num_allocs;
  std::optional<int64_t> largest_alloc_size;
};

struct ClientOptions {
  // PJRT create options for this plugin (e.g. {"cpu_device_count", int64_t{4}}).
  std::vector<NamedValue> create_options;
  // Multi-host jobs: the store PJRT_Client_Create's kv callbacks reach (kv_try_get too where the
  // plugin's PJRT has it, 0.61 on); the client keeps it until the plugin's client is destroyed.
  std::shared_ptr<KeyValueStore> kv_store;
  // This process's place in the job, passed as the create options "node_id" and "num_nodes" only when
  // given (a plugin that does not know them may refuse them): 0 <= node_id < num_nodes.
  std::optional<int64_t> node_id;
  std::optional<int64_t> num_nodes;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  // Creates a client; the plugin's error (e.g. "No visible GPU devices") comes back as a value.
  static Expected<std::shared_ptr<Client>> create(std::shared_ptr<const Plugin> plugin,
                                                  const ClientOptions& options = {}) noexcept;
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Plugin& plugin() const { return *plugin_; }
  const std::shared_ptr<const Plugin>& plugin_ptr() const { return plugin_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  // The addressable devices, in the plugin's order.
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  // The device's memory figures now; UNIMPLEMENTED when the plugin does not report them.
  Expected<DeviceMemoryStats> memory_stats(int device_index) const noexcept;
  // "xla_cpu_pjrt.so (cpu)" for messages.
  std::string label() const;

  // Copies `data` (row-major, exactly byte_size(dtype, dims) bytes: the checked product, so a shape whose
  // size overflows is OUT_OF_RANGE and a negative dimension INVALID_ARGUMENT) to a device.
  // The copy is complete when this returns: `data` may be reused at once.
  Expected<Buffer> buffer_from_host(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                                    int device_index = 0) const noexcept;
  // Makes a buffer over memory the caller hands over: `keep_alive` owns `data` and is released once
  // the plugin no longer needs the memory. On a CPU client with 64-byte-aligned data there is no
  // copy at all (the device buffer aliases the memory); elsewhere the transfer runs asynchronously
  // from it. `memory` says what the device may do to it:
  //  - kMutable: the caller gives the memory up; an execution that takes the buffer by donation may
  //    write its outputs into it;
  //  - kImmutable: the caller's memory must never change (an Erlang binary, a memory-mapped file):
  //    the plugin is told so, and the buffer refuses donation (Buffer::donatable() is false).
  Expected<Buffer> buffer_from_host_adopt(std::span<const std::byte> data, std::shared_ptr<const void> keep_alive,
                                          HostMemory memory, DType dtype, std::span<const int64_t> dims,
                                          int device_index = 0) const noexcept;

  // buffer_from_host through warm host memory. On a client whose buffers live in host memory (CPU),
  // `data` is copied into a block of the client's pool (faulted in once and reused: memcpy speed,
  // where the plugin's own copy allocates and faults fresh memory each time), which the device
  // buffer then aliases without a copy; the block goes back to the pool once the plugin is done with
  // it (the buffer, and any output a donation let alias it, are gone). The buffer may be donated.
  // Elsewhere it is buffer_from_host. `data` may be reused at once.
  Expected<Buffer> buffer_from_host_pooled(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                                           int device_index = 0) const noexcept;
  // A buffer over device memory that someone else owns (PJRT_Client_CreateViewOfDeviceBuffer):
  // `address` as Buffer::device_pointer gives it (on CPU, a host address), holding a row-major
  // array of `dtype` and `dims` on device `device_index`. Nothing is copied, and the view does not
  // own the memory: its owner must keep it alive, unchanged where the view is read, for as long as
  // the view (or an output that aliases it) lives. The view is never donatable. `on_release`, when
  // given, runs exactly once: when the plugin lets go of its last use of the memory (which may be
  // after the view is destroyed, on a plugin thread, once work that read it is done), or before this
  // returns an error; it must not throw or block. The plugin may refuse an address
  // (XLA's CPU client wants it aligned). UNIMPLEMENTED, naming the plugin, when its table does not
  // reach the function. (device_address.cpp)
  Expected<Buffer> view_of_device_memory(uintptr_t address, DType dtype, std::span<const int64_t> dims,
                                         int device_index = 0, std::function<void()> on_release = {}) const noexcept;
  // The pool behind buffer_from_host_pooled (its figures: HostBlockPool::stats).
  const HostBlockPool& host_pool() const { return *host_pool_; }

  // Compiles for this client's plugin. A portable artifact newer than the plugin's StableHLO (or older
  // than its minimum) is refused with both versions named.
  Expected<std::shared_ptr<Executable>> compile(const Program& program,
                                                const CompileOptions& options = CompileOptions()) const noexcept;

  // Loads an executable that Executable::serialize() made with this same plugin build
  // (PJRT_Executable_DeserializeAndLoad). `portable`: as it was compiled. `what` names it in messages.
  // The plugin's error for bytes it cannot load (another build's, or corrupt ones: callers check a
  // checksum first, see src/compile_cache).
  // `known`: the executable's description stored with it (Executable::description()), which spares
  // asking the plugin for it; null asks.
  Expected<std::shared_ptr<Executable>> load_serialized(std::string_view serialized, bool portable, const std::string& what,
                                                        const Description* known = nullptr) const noexcept;

  PJRT_Client* raw() const { return client_; }
  PJRT_Device* device_handle(int index) const { return device_handles_[static_cast<size_t>(index)]; }

  // An execute context with nothing in it, for the executions that must carry one and bring none (see
  // Plugin::require_execute_context). Made on first use and shared by every client of the plugin:
  // nothing ever writes to it, so concurrent executions may all pass it. Never destroyed (an
  // execution dropped unfinished may still be using it). A failure to make it is returned, and the
  // next call tries again.
  Expected<PJRT_ExecuteContext*> empty_execute_context() const;

 private:
  Client() = default;
  Status check_array(size_t bytes, DType dtype, std::span<const int64_t> dims, int device_index) const;
  // PJRT_Client_BufferFromHostBuffer with the given PJRT_HostBufferSemantics; `done` receives the
  // done-with-host-buffer event.
  Expected<Buffer> transfer(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                            int device_index, int semantics, Event& done) const;

  std::shared_ptr<const Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_;
  std::string platform_version_;
  std::vector<DeviceInfo> devices_;
  std::vector<PJRT_Device*> device_handles_;
  std::unique_ptr<HostBlockPool> host_pool_ = std::make_unique<HostBlockPool>();
  std::shared_ptr<KeyValueStore> kv_store_;  // what the plugin's kv callbacks reach, for its client's life
};

}  // namespace plugboard
