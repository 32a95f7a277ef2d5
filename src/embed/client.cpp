// The facade's Client: devices, transfers, callback declaration and compilation (also on a compile
// thread).
#include <algorithm>
#include <thread>

#include "base/no_throw.h"
#include "base/thread_pool.h"
#include "callback/registry.h"
#include "embed/handles.h"
#include "lapack/targets.h"
#include "plugin/plugin.h"

namespace plugboard::api {

namespace {

// Compiles run here when asked asynchronously (compile_async, post_compile_work): a compile takes a
// thread for milliseconds to seconds, and a binding's caller (a BEAM scheduler) must not be that
// thread. One per process, for the library and its bindings alike. Never destroyed, as the delivery
// pool.
ThreadPool& compile_pool() {
  static ThreadPool* pool = new ThreadPool("pb-compile", std::max<size_t>(2, std::thread::hardware_concurrency()));
  return *pool;
}

plugboard::Partitioner runtime_partitioner(Partitioner p) {
  switch (p) {
    case Partitioner::kNone: return plugboard::Partitioner::kNone;
    case Partitioner::kGspmd: return plugboard::Partitioner::kGspmd;
    case Partitioner::kShardy: return plugboard::Partitioner::kShardy;
  }
  return plugboard::Partitioner::kNone;
}

Expected<plugboard::CompileOptions> runtime_options(const plugboard::Client& client, const CompileOptions& options) {
  plugboard::CompileOptions out = options.plugin_defaults ? plugboard::CompileOptions::plugin_defaults()
                                                          : plugboard::CompileOptions();
  out.portable = options.portable;
  out.num_partitions = options.num_partitions;
  out.partitioner = runtime_partitioner(options.partitioner);
  // Device indices become the plugin's device ids, which a device assignment names.
  for (int index : options.devices) {
    if (index < 0 || static_cast<size_t>(index) >= client.devices().size())
      return invalid_argument("device " + std::to_string(index) + " in CompileOptions::devices is out of range: " +
                              client.label() + " has " + std::to_string(client.devices().size()) +
                              " addressable device(s)");
    out.device_ids.push_back(client.devices()[static_cast<size_t>(index)].id);
  }
  if (!options.devices.empty() && options.devices.size() != static_cast<size_t>(std::max(options.num_partitions, 1)))
    return invalid_argument("CompileOptions::devices names " + std::to_string(options.devices.size()) +
                            " device(s) for " + std::to_string(options.num_partitions) + " partition(s)");
  for (const std::string& assignment : options.xla_options)
    PB_RETURN_IF_ERROR(annotate(out.set_from_text(assignment), "XLA option '" + assignment + "'"));
  PB_RETURN_IF_ERROR(out.check());
  return out;
}

ExecutableSource source_of(compile_cache::Origin origin) {
  switch (origin) {
    case compile_cache::Origin::kCompiled: return ExecutableSource::kCompiled;
    case compile_cache::Origin::kCompileCache: return ExecutableSource::kCompileCache;
    case compile_cache::Origin::kPrecompiled: return ExecutableSource::kPrecompiled;
  }
  return ExecutableSource::kCompiled;
}

Expected<Executable> compile_on(const Client::Impl& client, const Program& program, const CompileOptions& options) {
  PB_ASSIGN_OR_RETURN(plugboard::CompileOptions runtime, runtime_options(*client.client, options));
  compile_cache::CompileSources sources;
  if (options.compile_cache) {
    PB_ASSIGN_OR_RETURN(sources, compile_cache::default_sources(client.precompiled));
  }
  PB_ASSIGN_OR_RETURN(compile_cache::CompileOutcome outcome,
                      compile_cache::compile(*client.client, program.impl()->program, runtime, sources));
  auto impl = std::make_shared<Executable::Impl>();
  impl->name = outcome.executable->name();
  impl->executable = std::move(outcome.executable);
  impl->report = {source_of(outcome.origin), outcome.ms, std::move(outcome.key), std::move(outcome.entry),
                  std::move(outcome.notes)};
  return Executable(std::move(impl));
}

}  // namespace

std::shared_ptr<const Client> wrap_client(std::shared_ptr<plugboard::Client> client,
                                          std::vector<compile_cache::PrecompiledFile> precompiled, bool self_test) {
  // The host-callback self-test is an execution on device 0: run on a client in use (on the first
  // declaration, as it was), it queued behind that device's work, so a declaration and the compile
  // after it waited for a callback that does not answer. Here nothing else can have run on the client
  // yet. Its outcome is kept for the plugin (declare_callbacks returns it); a platform without a
  // callback path is refused at once, with no execution.
  if (self_test) (void)self_test_callbacks(*client);
  auto impl = std::make_unique<Client::Impl>();
  impl->precompiled = std::move(precompiled);
  impl->platform = client->platform_name();
  impl->platform_version = client->platform_version();
  impl->client = std::move(client);
  return std::make_shared<const Client>(std::move(impl));
}

Client::Client(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Client::~Client() = default;

Expected<std::shared_ptr<const Client>> Client::open(const std::filesystem::path& plugin,
                                                     const std::vector<CreateOption>& options) noexcept {
  return open(plugin, options, Distribution{});
}

Expected<std::shared_ptr<const Client>> Client::open(const std::filesystem::path& plugin,
                                                     const std::vector<CreateOption>& options,
                                                     const Distribution& distribution) noexcept {
  return no_throw("opening a plugin", [&]() -> Expected<std::shared_ptr<const Client>> {
    PB_ASSIGN_OR_RETURN(std::shared_ptr<const Plugin> loaded, load_plugin(plugin));
    ClientOptions client_options;
    client_options.kv_store = distribution.kv_store;
    client_options.node_id = distribution.node_id;
    client_options.num_nodes = distribution.num_nodes;
    for (const CreateOption& o : options)
      client_options.create_options.push_back(
          {o.name, std::visit([](const auto& v) -> NamedValueData { return v; }, o.value)});
    PB_ASSIGN_OR_RETURN(std::shared_ptr<plugboard::Client> client, plugboard::Client::create(loaded, client_options));
    // A node of a multi-host job may not address device 0 of the job: its self-test waits for a
    // first declaration (which runs it then).
    return wrap_client(std::move(client), {}, distribution.num_nodes.value_or(1) <= 1);
  });
}

const std::string& Client::platform() const noexcept { return impl_->platform; }
const std::string& Client::platform_version() const noexcept { return impl_->platform_version; }

std::filesystem::path Client::plugin_path() const noexcept {
  try {
    return impl_->client->plugin().path();
  } catch (...) {
    return {};
  }
}

std::vector<Device> Client::devices() const noexcept {
  try {
    std::vector<Device> out;
    const auto& devices = impl_->client->devices();
    for (size_t i = 0; i < devices.size(); ++i) {
      Device d;
      d.index = static_cast<int>(i);
      d.id = devices[i].id;
      d.local_hardware_id = devices[i].local_hardware_id;
      d.kind = devices[i].kind;
      d.description = devices[i].description;
      if (auto stats = impl_->client->memory_stats(d.index))
        d.memory = DeviceMemory{stats->bytes_in_use, stats->peak_bytes_in_use, stats->bytes_limit, stats->num_allocs,
                                stats->largest_alloc_size};
      out.push_back(std::move(d));
    }
    return out;
  } catch (...) {
    return {};
  }
}

Expected<Buffer> Client::copy_to_device(std::span<const std::byte> data, DType dtype, std::span<const int64_t> dims,
                                        int device) const noexcept {
  return no_throw("copying to the device", [&]() -> Expected<Buffer> {
    PB_ASSIGN_OR_RETURN(plugboard::Buffer b, impl_->client->buffer_from_host(data, dtype, dims, device));
    return wrap_buffer(std::move(b));
  });
}

Expected<Buffer> Client::adopt(std::span<const std::byte> data, std::shared_ptr<const void> owner, HostMemory memory,
                               DType dtype, std::span<const int64_t> dims, int device) const noexcept {
  return no_throw("adopting host memory", [&]() -> Expected<Buffer> {
    const auto kind = memory == HostMemory::kImmutable ? plugboard::HostMemory::kImmutable : plugboard::HostMemory::kMutable;
    PB_ASSIGN_OR_RETURN(plugboard::Buffer b,
                        impl_->client->buffer_from_host_adopt(data, std::move(owner), kind, dtype, dims, device));
    return wrap_buffer(std::move(b));
  });
}

Expected<Buffer> Client::view_of_device_memory(uintptr_t address, DType dtype, std::span<const int64_t> dims, int device,
                                               std::function<void()> on_release) const noexcept {
  return no_throw("making a view of device memory", [&]() -> Expected<Buffer> {
    PB_ASSIGN_OR_RETURN(plugboard::Buffer b,
                        impl_->client->view_of_device_memory(address, dtype, dims, device, std::move(on_release)));
    return wrap_buffer(std::move(b));
  });
}

Status Client::declare_callbacks(const HostCallbacks& callbacks) const noexcept {
  return plugboard::declare_callbacks(*impl_->client, *callbacks.impl()->receiver);
}

Status Client::declare_lapack() const noexcept { return plugboard::declare_lapack(*impl_->client); }

Expected<Executable> Client::compile(const Program& program, const CompileOptions& options) const noexcept {
  return no_throw("compiling", [&] { return compile_on(*impl_, program, options); });
}

bool post_compile_work(std::function<void()> task) noexcept {
  if (!task) return false;
  try {
    compile_pool().post(std::move(task));
    return true;
  } catch (...) {  // no memory, or no thread at all: the task did not run and never will
    return false;
  }
}

Status Client::compile_async(Program program, CompileOptions options,
                             std::function<void(Expected<Executable>)> done) const noexcept {
  return no_throw("compiling", [&]() -> Status {
    if (!done) return invalid_argument("compile_async needs a function to call with the outcome");
    // The Impl lives as long as its Client, which the caller may drop: the task keeps what it reads.
    auto impl = std::make_shared<Client::Impl>(*impl_);
    compile_pool().post([client = std::move(impl), program = std::move(program), options = std::move(options),
                         done = std::move(done)]() mutable {
      Expected<Executable> result = no_throw("compiling", [&] { return compile_on(*client, program, options); });
      try {
        done(std::move(result));
      } catch (...) {
        // Nobody to throw to on a compile thread.
      }
    });
    return ok();
  });
}

}  // namespace plugboard::api
