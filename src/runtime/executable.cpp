#include "runtime/executable.h"

#include <algorithm>

#include "base/no_throw.h"
#include "plugin/plugin_output.h"
#include "runtime/client.h"
#include "runtime/executable_internal.h"
#include "runtime/traced_event.h"

namespace plugboard {

std::string ArrayType::to_string() const { return shape_string(dtype, dims.to_vector()); }

namespace internal {
namespace {

Status check_stablehlo_version(const Plugin& plugin, const Program& program) {
  const auto& version = program.stablehlo_version();
  if (!version) return ok();
  const auto current = plugin.stablehlo_current_version();
  const auto minimum = plugin.stablehlo_minimum_version();
  const std::string what = "program " + program.name() + " is a StableHLO " + version->to_string() + " portable artifact";
  if (current && *version > *current)
    return make_error(Code::kFailedPrecondition,
                      what + ", newer than plugin " + plugin.path().string() + " supports (stablehlo_current_version " +
                          current->to_string() + "); serialize it for " + current->to_string() + " or older");
  if (minimum && *version < *minimum)
    return make_error(Code::kFailedPrecondition, what + ", older than plugin " + plugin.path().string() +
                                                     " accepts (stablehlo_minimum_version " + minimum->to_string() + ")");
  return ok();
}

// Shardings the partitioner would not read. Found on the CPU plugins (tests/partitioned_execute_test):
// a program whose only shardings are GSPMD's (`mhlo.sharding`) compiled with the Shardy partitioner
// is not split at all by XLA 0.81 and 0.106 (every device runs the whole program on whole arrays)
// and aborts the process in 0.115 (a CHECK in its Shardy import: "Expected HloShardingV3"). The
// other way round, `sdy` shardings with the GSPMD partitioner, all three split as written.
Status check_sharding_form(const Plugin& plugin, const Program& program, const CompileOptions& options) {
  if (options.partitioner != Partitioner::kShardy) return ok();
  const std::string& bytes = program.bytes();
  if (bytes.find("mhlo.sharding") == std::string::npos || bytes.find("sdy.") != std::string::npos) return ok();
  return invalid_argument("program " + program.name() + " carries GSPMD shardings (mhlo.sharding) and none of Shardy's (sdy dialect): " +
                          "the Shardy partitioner does not read them (plugin " + plugin.path().string() +
                          " would not split the program, or abort); compile it with the GSPMD partitioner, or annotate "
                          "it with sdy.mesh and sdy.sharding");
}

}  // namespace

PJRT_Program pjrt_program_of(const Program& program) {
  static constexpr char kFormat[] = "mlir";  // takes text and bytecode alike
  auto pjrt_program = PB_PJRT_ARGS(PJRT_Program);
  pjrt_program.code = const_cast<char*>(program.bytes().data());
  pjrt_program.code_size = program.bytes().size();
  pjrt_program.format = kFormat;
  pjrt_program.format_size = sizeof(kFormat) - 1;
  return pjrt_program;
}

Expected<std::shared_ptr<Executable>> compile(std::shared_ptr<const Client> client, const Program& program,
                                              const CompileOptions& options) {
  const Plugin& plugin = client->plugin();
  const abi::Api& api = plugin.api();
  std::string doing = "compiling " + program.name() + " with " + plugin.path().string();
  PB_RETURN_IF_ERROR(annotate(check_stablehlo_version(plugin, program), doing));
  PB_RETURN_IF_ERROR(annotate(options.check(), doing));
  PB_RETURN_IF_ERROR(annotate(check_sharding_form(plugin, program, options), doing));
  if (options.partitioner != Partitioner::kNone)
    doing += " for " + std::to_string(options.num_replicas * options.num_partitions) + " device(s), partitioner " +
             std::string(partitioner_name(options.partitioner));

  const std::string serialized = options.serialize();
  PJRT_Program pjrt_program = pjrt_program_of(program);
  auto args = PB_PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = client->raw();
  args.program = &pjrt_program;
  args.compile_options = serialized.data();
  args.compile_options_size = serialized.size();
  {
    trace::Scope span("PJRT_Client_Compile", "plugin");
    span.arg("program", program.name()).arg("bytes", static_cast<int64_t>(program.bytes().size()));
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Client_Compile, args), doing));
  }
  return adopt_loaded(std::move(client), args.executable, options.portable, doing, nullptr);
}

Expected<std::shared_ptr<Executable>> deserialize(std::shared_ptr<const Client> client, std::string_view serialized,
                                                  bool portable, const std::string& what, const Description* known) {
  const abi::Api& api = client->plugin().api();
  const std::string doing = "loading " + what + " with " + client->plugin().path().string();
  auto args = PB_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client->raw();
  args.serialized_executable = serialized.data();
  args.serialized_executable_size = serialized.size();
  {
    trace::Scope span("PJRT_Executable_DeserializeAndLoad", "plugin");
    span.arg("what", what).arg("bytes", static_cast<int64_t>(serialized.size()));
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Executable_DeserializeAndLoad, args), doing));
  }
  if (!args.loaded_executable)
    return make_error(Code::kInternal, doing + ": PJRT_Executable_DeserializeAndLoad handed back no executable");
  return adopt_loaded(std::move(client), args.loaded_executable, portable, doing, known);
}

Expected<std::shared_ptr<Executable>> adopt_loaded(std::shared_ptr<const Client> client, PJRT_LoadedExecutable* loaded,
                                                   bool portable, const std::string& doing, const Description* known) {
  const abi::Api& api = client->plugin().api();
  std::shared_ptr<Executable> exe;
  try {
    exe.reset(new Executable());
  } catch (...) {
    auto d = PB_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
    d.executable = loaded;
    (void)PB_PJRT_CALL(api, PJRT_LoadedExecutable_Destroy, d);
    throw;  // no_throw above turns it into an error value
  }
  exe->client_ = std::move(client);
  exe->loaded_ = loaded;  // owned from here
  exe->portable_ = portable;
  if (known) {
    exe->name_ = known->name;
    exe->signature_ = known->signature;
  } else {
    PB_RETURN_IF_ERROR(describe(api, *exe, doing));
  }
  if (!portable) PB_RETURN_IF_ERROR(exe->query_devices(doing));
  for (size_t i = 0; i < exe->signature_.parameters.size(); ++i)
    exe->all_arg_indices_.push_back(static_cast<int64_t>(i));
  return std::shared_ptr<Executable>(std::move(exe));
}

Status describe(const abi::Api& api, Executable& exe, const std::string& doing) {
  PB_ASSIGN_OR_RETURN(UnloadedExecutable handle, annotate(unloaded_executable(api, exe.loaded_), doing));
  auto name = PB_PJRT_ARGS(PJRT_Executable_Name_Args);
  name.executable = handle.get();
  if (PB_PJRT_CALL(api, PJRT_Executable_Name, name))
    exe.name_.assign(abi::view(name.executable_name, name.executable_name_size));
  PB_ASSIGN_OR_RETURN(exe.signature_, annotate(query_signature(api, handle.get()), doing));
  return ok();
}

UnloadedExecutable::~UnloadedExecutable() {
  if (!exe_) return;
  auto d = PB_PJRT_ARGS(PJRT_Executable_Destroy_Args);
  d.executable = exe_;
  (void)PB_PJRT_CALL(*api_, PJRT_Executable_Destroy, d);
}

Expected<UnloadedExecutable> unloaded_executable(const abi::Api& api, PJRT_LoadedExecutable* loaded) {
  auto get = PB_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = loaded;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_LoadedExecutable_GetExecutable, get));
  if (!get.executable) return make_error(Code::kInternal, "PJRT_LoadedExecutable_GetExecutable handed back no executable");
  return UnloadedExecutable(api, get.executable);
}

Expected<std::string> serialize(const abi::Api& api, PJRT_Executable* executable) {
  auto args = PB_PJRT_ARGS(PJRT_Executable_Serialize_Args);
  args.executable = executable;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Executable_Serialize, args));
  // The bytes live as long as serialized_executable; the deleter frees it (once).
  struct Release {
    PJRT_Executable_Serialize_Args& a;
    ~Release() {
      if (a.serialized_executable && a.serialized_executable_deleter) a.serialized_executable_deleter(a.serialized_executable);
    }
  } release{args};
  if (!args.serialized_bytes && args.serialized_bytes_size > 0)
    return make_error(Code::kInternal, "PJRT_Executable_Serialize handed back a size but no bytes");
  if (args.serialized_bytes_size == 0) return make_error(Code::kInternal, "PJRT_Executable_Serialize handed back no bytes");
  return std::string(args.serialized_bytes, args.serialized_bytes_size);
}

}  // namespace internal

namespace {

// The dims of one output as the plugin's buffer has them, not as the signature declares them: a
// bounded dynamic dimension (`tensor<?xf32, #stablehlo.bounds<8>>`) is declared with its bound, and the
// size an execution gave it is known from the buffer only (PJRT_Buffer_UnpaddedDimensions, which waits
// for the output to be computed). A shape from the plugin that is negative, overflows or has another
// rank than declared is an error naming the output.
Expected<Dims> output_dims(const abi::Api& api, PJRT_Buffer* buffer, const ArrayType& declared, size_t index) {
  if (!PB_PJRT_HAS(api, PJRT_Buffer_Dimensions)) return declared.dims;
  const auto which = [&] { return "output " + std::to_string(index); };
  bool dynamic = false;
  if (PB_PJRT_HAS(api, PJRT_Buffer_DynamicDimensionIndices)) {
    auto indices = PB_PJRT_ARGS(PJRT_Buffer_DynamicDimensionIndices_Args);
    indices.buffer = buffer;
    // A plugin that cannot tell has no dynamic dimensions to report: its dimensions are the sizes.
    dynamic = PB_PJRT_CALL(api, PJRT_Buffer_DynamicDimensionIndices, indices) && indices.num_dynamic_dims > 0;
  }
  const int64_t* dims = nullptr;
  size_t rank = 0;
  if (dynamic && PB_PJRT_HAS(api, PJRT_Buffer_UnpaddedDimensions)) {
    auto unpadded = PB_PJRT_ARGS(PJRT_Buffer_UnpaddedDimensions_Args);
    unpadded.buffer = buffer;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Buffer_UnpaddedDimensions, unpadded), which()));
    dims = unpadded.unpadded_dims;
    rank = unpadded.num_dims;
  } else {
    auto padded = PB_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
    padded.buffer = buffer;
    PB_RETURN_IF_ERROR(annotate(PB_PJRT_CALL(api, PJRT_Buffer_Dimensions, padded), which()));
    dims = padded.dims;
    rank = padded.num_dims;
  }
  if (rank != declared.dims.size() || (rank > 0 && !dims))
    return make_error(Code::kInternal, "the plugin's " + which() + " has rank " + std::to_string(rank) +
                                           (rank > 0 && !dims ? " but no dimensions" : "") + ", declared " +
                                           declared.to_string());
  Dims out(std::span<const int64_t>(dims, rank));
  if (auto size = byte_size(declared.dtype, out.span()); !size)
    return std::unexpected(std::move(size).error().annotate("the plugin's " + which() + " has an invalid shape"));
  return out;
}

}  // namespace

Expected<std::string> Executable::serialize() const noexcept {
  return no_throw("serializing an executable", [&]() -> Expected<std::string> {
    const abi::Api& api = client_->plugin().api();
    const std::string doing = "serializing " + name_ + " with " + client_->plugin().path().string();
    PB_ASSIGN_OR_RETURN(internal::UnloadedExecutable handle, annotate(internal::unloaded_executable(api, loaded_), doing));
    return annotate(internal::serialize(api, handle.get()), doing);
  });
}

Executable::~Executable() {
  if (!loaded_) return;
  auto args = PB_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = loaded_;
  (void)PB_PJRT_CALL(client_->plugin().api(), PJRT_LoadedExecutable_Destroy, args);
}

namespace {
// Dims equality as a plain loop: ranks are small, and a library memcmp costs more than the compare.
bool same_dims(const Dims& a, const Dims& b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const int64_t* x = a.data();
  const int64_t* y = b.data();
  for (size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) return false;
  return true;
}
}  // namespace

Status Executable::query_devices(const std::string& doing) {
  const abi::Api& api = client_->plugin().api();
  devices_ = {0};  // where a plugin cannot tell: the program runs where it was compiled for
  if (!PB_PJRT_HAS(api, PJRT_LoadedExecutable_AddressableDevices)) return ok();
  auto args = PB_PJRT_ARGS(PJRT_LoadedExecutable_AddressableDevices_Args);
  args.executable = loaded_;
  if (!PB_PJRT_CALL(api, PJRT_LoadedExecutable_AddressableDevices, args)) return ok();
  constexpr std::string_view kFunction = "PJRT_LoadedExecutable_AddressableDevices";
  PB_ASSIGN_OR_RETURN(std::span<PJRT_Device* const> listed,
                      annotate(plugin_output::list(api, kFunction, "addressable_devices",
                                                   static_cast<PJRT_Device* const*>(args.addressable_devices),
                                                   args.num_addressable_devices),
                               doing));
  if (listed.empty()) return ok();
  std::vector<int> devices;
  for (size_t k = 0; k < listed.size(); ++k) {
    int index = -1;
    for (size_t i = 0; i < client_->devices().size(); ++i)
      if (client_->device_handle(static_cast<int>(i)) == listed[k]) index = static_cast<int>(i);
    if (index < 0)
      return std::unexpected(plugin_output::bad_output(api, kFunction,
                                                       "device " + std::to_string(k) +
                                                           ", which is none of the client's addressable devices")
                                 .annotate(doing));
    devices.push_back(index);
  }
  devices_ = std::move(devices);
  return ok();
}

Status Executable::check_args(std::span<Buffer* const> args, const ExecuteOptions& options) const {
  if (options.device < 0 || static_cast<size_t>(options.device) >= client_->devices().size())
    return invalid_argument("device " + std::to_string(options.device) + " out of range: " + client_->label() +
                            " has " + std::to_string(client_->devices().size()) + " addressable device(s)");
  if (devices_.size() > 1)
    return invalid_argument(name_ + " was compiled for " + std::to_string(devices_.size()) +
                            " devices: run it on all of them at once (execute_partitioned), one argument list per device");
  return check_list(args, options, options.device);
}

Status Executable::check_list(std::span<Buffer* const> args, const ExecuteOptions& options, int device) const {
  const auto& params = signature_.parameters;
  if (signature_.parameters_known && args.size() != params.size())
    return invalid_argument(name_ + " takes " + std::to_string(params.size()) + " argument(s), " +
                            std::to_string(args.size()) + " given");
  // This loop runs on every execute: one pass of plain compares per argument; the messages are built
  // only when refusing.
  const Client* const self = client_.get();
  const bool typed = signature_.parameters_known;
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer* b = args[i];
    if (b && b->valid() && b->client_.get() == self && b->device_index_ == device &&
        (!typed || (b->dtype_ == params[i].dtype && same_dims(b->dims_, params[i].dims))))
      continue;
    auto which = [&] { return "argument " + std::to_string(i) + " of " + name_; };
    if (!b) return invalid_argument(which() + " is null");
    if (!b->valid())
      return invalid_argument(which() + (b->donated() ? " (" + b->shape_string() + ") was donated to an earlier execution"
                                                      : std::string(" is an empty buffer (default-constructed or moved from)")));
    if (b->client().get() != self)
      return invalid_argument(which() + " belongs to another client (" + b->client()->label() + "), not " + client_->label());
    if (b->device_index() != device)
      return invalid_argument(which() + " is on device " + std::to_string(b->device_index()) +
                              "; the execution runs on device " + std::to_string(device));
    return invalid_argument(which() + ": expected " + params[i].to_string() + ", given " + b->shape_string());
  }
  for (int d : options.donate) {
    if (d < 0 || static_cast<size_t>(d) >= args.size())
      return invalid_argument("donated argument index " + std::to_string(d) + " out of range: " + name_ + " has " +
                              std::to_string(args.size()) + " argument(s)");
    if (args[static_cast<size_t>(d)]->view() == BufferView::kImmutableHost)
      return invalid_argument("argument " + std::to_string(d) + " of " + name_ +
                              " cannot be donated: it is a view of immutable host memory (adopted with "
                              "HostMemory::kImmutable), which the execution must not write; copy it to the device "
                              "instead, or adopt memory the caller lets the device overwrite");
    if (!args[static_cast<size_t>(d)]->donatable())
      return invalid_argument("argument " + std::to_string(d) + " of " + name_ +
                              " cannot be donated: it is a view of device memory it does not own "
                              "(Client::view_of_device_memory), which only its owner may give up");
    if (std::count(options.donate.begin(), options.donate.end(), d) > 1)
      return invalid_argument("argument " + std::to_string(d) + " is listed twice in donate");
    for (size_t j = 0; j < args.size(); ++j)
      if (static_cast<int>(j) != d && args[j] == args[static_cast<size_t>(d)])
        return invalid_argument("argument " + std::to_string(d) + " is donated but also passed as argument " +
                                std::to_string(j));
  }
  return ok();
}

Status Executable::execute_options(size_t num_args, const ExecuteOptions& options, PJRT_ExecuteOptions& opts,
                                   std::vector<int64_t>& scratch) const {
  opts.context = options.context;
  if (!opts.context && client_->plugin().needs_execute_context()) {  // see Plugin::require_execute_context
    auto shared = client_->empty_execute_context();
    if (!shared) return std::unexpected(std::move(shared).error().annotate("executing " + name_));
    opts.context = *shared;
  }
  if (options.donate.empty() && num_args <= all_arg_indices_.size()) {
    opts.non_donatable_input_indices = all_arg_indices_.data();
    opts.num_non_donatable_input_indices = std::min(all_arg_indices_.size(), num_args);
  } else {
    for (size_t i = 0; i < num_args; ++i)
      if (options.donate.empty() || std::find(options.donate.begin(), options.donate.end(), static_cast<int>(i)) == options.donate.end())
        scratch.push_back(static_cast<int64_t>(i));
    opts.non_donatable_input_indices = scratch.data();
    opts.num_non_donatable_input_indices = scratch.size();
  }
  return ok();
}

Status Executable::launch(std::span<Buffer* const> args, const ExecuteOptions& options, PJRT_Buffer** out_list,
                          PJRT_Event** complete) const {
  PB_RETURN_IF_ERROR(check_args(args, options));
  const abi::Api& api = client_->plugin().api();

  // Small argument lists live on the stack.
  constexpr size_t kInline = 16;
  PJRT_Buffer* arg_inline[kInline];
  std::vector<PJRT_Buffer*> arg_heap;
  PJRT_Buffer** arg_list = arg_inline;
  if (args.size() > kInline) arg_list = (arg_heap.resize(args.size()), arg_heap.data());
  for (size_t i = 0; i < args.size(); ++i) arg_list[i] = args[i]->raw();

  std::vector<int64_t> non_donatable;
  auto opts = PB_PJRT_ARGS(PJRT_ExecuteOptions);
  PB_RETURN_IF_ERROR(execute_options(args.size(), options, opts, non_donatable));

  PJRT_Buffer* const* argument_lists[1] = {arg_list};
  PJRT_Buffer** output_lists[1] = {out_list};
  auto exec = PB_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec.executable = loaded_;
  exec.options = &opts;
  exec.argument_lists = argument_lists;
  exec.num_devices = 1;
  exec.num_args = args.size();
  exec.output_lists = output_lists;
  exec.device_complete_events = complete;
  // A portable program has no device assignment: it is always launched on a named device (device
  // 0 included). Another program runs where it was compiled for unless a device is asked for.
  if (portable_ || options.device != 0) exec.execute_device = client_->device_handle(options.device);
  trace::Scope call("PJRT_LoadedExecutable_Execute", "plugin");
  if (auto st = PB_PJRT_CALL(api, PJRT_LoadedExecutable_Execute, exec); !st)
    return std::unexpected(std::move(st).error().annotate("executing " + name_));
  // Donated arguments were consumed by the plugin: their handles only need destroying.
  for (int d : options.donate) args[static_cast<size_t>(d)]->give_up();
  return ok();
}

Status Executable::adopt_outputs(PJRT_Buffer* const* out_list, std::span<Buffer> outputs, int device,
                                 bool dims_from_buffers) const {
  const abi::Api& api = client_->plugin().api();
  const size_t n_out = outputs.size();
  // Every output gets an owner first, so that none leaks when a later one's shape is refused.
  for (size_t i = 0; i < n_out; ++i) outputs[i].rebind(client_, out_list[i], signature_.results[i].dtype, device);
  for (size_t i = 0; i < n_out; ++i)
    if (!out_list[i])
      return std::unexpected(plugin_output::bad_output(api, "PJRT_LoadedExecutable_Execute",
                                                       "a null buffer for output " + std::to_string(i)));
  for (size_t i = 0; i < n_out; ++i) {
    if (!dims_from_buffers && i < signature_.results_dynamic.size() && !signature_.results_dynamic[i]) {
      outputs[i].dims_ = signature_.results[i].dims;
      continue;
    }
    auto dims = output_dims(api, out_list[i], signature_.results[i], i);
    if (!dims) return std::unexpected(std::move(dims).error().annotate("executing " + name_));
    outputs[i].dims_ = std::move(*dims);
  }
  return ok();
}

namespace {
// Output handle slots: on the stack for small programs.
class OutputSlots {
 public:
  explicit OutputSlots(size_t n) {
    if (n > kInline) heap_.resize(n);
  }
  PJRT_Buffer** data() { return heap_.empty() ? inline_ : heap_.data(); }

 private:
  static constexpr size_t kInline = 16;
  PJRT_Buffer* inline_[kInline] = {};
  std::vector<PJRT_Buffer*> heap_;
};
}  // namespace

namespace {
// An execution's span on its device's track, from its launch until its outputs are ready.
trace::Deferred device_span(const std::string& executable, int64_t launched_ns, int device) {
  return std::move(trace::Deferred("execute", "device", launched_ns).arg("executable", executable).arg("device", device));
}
trace::Track device_track(const Client& client, int device) {
  return client.devices()[static_cast<size_t>(device)].trace_track;
}
}  // namespace

Expected<Execution> Executable::execute_async(std::span<Buffer* const> args, const ExecuteOptions& options) const noexcept {
  return no_throw("executing", [&]() -> Expected<Execution> {
    const size_t n_out = signature_.results.size();
    OutputSlots slots(n_out);
    PJRT_Event* complete[1] = {nullptr};
    Execution result;
    result.outputs.resize(n_out);  // before the launch: nothing after it may fail for want of memory
    trace::Scope span("launch", "execute");
    span.arg("executable", name_).arg("device", options.device);
    PB_RETURN_IF_ERROR(launch(args, options, slots.data(), complete));

    result.done = Event(client_, complete[0]);
    if (span) result.device_span = finish_when_ready(result.done, device_span(name_, span.start_ns(), options.device), device_track(*client_, options.device));
    if (Status adopted = adopt_outputs(slots.data(), result.outputs, options.device); !adopted) {
      // The plugin gave outputs plugboard cannot take. The execution is running: an error returned
      // now would let the caller release what it uses (an execute context, host callbacks' state).
      finish_span(result.device_span, result.done.await());
      return std::unexpected(std::move(adopted).error());
    }
    return result;
  });
}

Status Executable::execute_into(std::span<Buffer* const> args, std::vector<Buffer>& outputs,
                                const ExecuteOptions& options) const noexcept {
  return no_throw("executing", [&]() -> Status {
    const size_t n_out = signature_.results.size();
    OutputSlots slots(n_out);
    PJRT_Event* complete[1] = {nullptr};
    trace::Scope span("execute", "execute");  // the launch and the wait for the outputs
    span.arg("executable", name_).arg("device", options.device);
    // A refused call ran nothing: `outputs` stays as it was (its buffers may be this call's arguments).
    if (auto st = launch(args, options, slots.data(), complete); !st) return st;
    // The event is awaited and destroyed here: no Event object (and no client reference) is made.
    Status done = ok();
    trace::Deferred on_device = span ? device_span(name_, span.start_ns(), options.device) : trace::Deferred();
    if (complete[0]) {
      const abi::Api& api = client_->plugin().api();
      auto await = PB_PJRT_ARGS(PJRT_Event_Await_Args);
      await.event = complete[0];
      done = PB_PJRT_CALL(api, PJRT_Event_Await, await);
      auto destroy = PB_PJRT_ARGS(PJRT_Event_Destroy_Args);
      destroy.event = complete[0];
      (void)PB_PJRT_CALL(api, PJRT_Event_Destroy, destroy);
    }
    if (on_device) on_device.arg("status", trace_status(done)).finish(device_track(*client_, options.device));
    if (!done) {
      // The execution failed: its outputs are released and the caller's storage (which may hold
      // this call's arguments) is left as it was.
      std::vector<Buffer> failed(n_out);
      (void)adopt_outputs(slots.data(), failed, options.device);
      return std::unexpected(std::move(done).error().annotate("executing " + name_));
    }
    outputs.resize(n_out);
    if (Status adopted = adopt_outputs(slots.data(), outputs, options.device); !adopted) {
      outputs.clear();
      return adopted;
    }
    return ok();
  });
}

Expected<std::vector<Execution>> Executable::execute_partitioned(std::span<const std::vector<Buffer*>> args,
                                                                 const ExecuteOptions& options) const noexcept {
  return no_throw("executing on several devices", [&]() -> Expected<std::vector<Execution>> {
    const size_t n_dev = devices_.size();
    if (n_dev == 0)
      return invalid_argument(name_ + " was compiled portable: it runs on one device at a time, the one "
                                      "ExecuteOptions::device names (execute)");
    if (options.device != 0)
      return invalid_argument(name_ + " runs on the devices it was compiled for; ExecuteOptions::device must be 0, got " +
                              std::to_string(options.device));
    if (args.size() != n_dev) {
      std::string listed;
      for (int d : devices_) listed += (listed.empty() ? "" : ", ") + std::to_string(d);
      return invalid_argument(name_ + " runs on " + std::to_string(n_dev) + " device(s) (" + listed + "): " +
                              std::to_string(args.size()) + " argument list(s) given, one per device expected");
    }
    const size_t n_args = args[0].size();
    for (size_t k = 0; k < n_dev; ++k) {
      const std::string which = "argument list " + std::to_string(k) + " (device " + std::to_string(devices_[k]) + ")";
      if (args[k].size() != n_args)
        return invalid_argument(which + " has " + std::to_string(args[k].size()) + " argument(s), argument list 0 has " +
                                std::to_string(n_args));
      PB_RETURN_IF_ERROR(annotate(check_list(args[k], options, devices_[k]), which));
    }

    const size_t n_out = signature_.results.size();
    std::vector<std::vector<PJRT_Buffer*>> raw_args(n_dev), raw_outputs(n_dev, std::vector<PJRT_Buffer*>(n_out, nullptr));
    std::vector<PJRT_Buffer* const*> argument_lists(n_dev);
    std::vector<PJRT_Buffer**> output_lists(n_dev);
    for (size_t k = 0; k < n_dev; ++k) {
      for (Buffer* b : args[k]) raw_args[k].push_back(b->raw());
      argument_lists[k] = raw_args[k].data();
      output_lists[k] = raw_outputs[k].data();
    }
    std::vector<PJRT_Event*> complete(n_dev, nullptr);
    // Before the launch: nothing after it may fail for want of memory.
    std::vector<Execution> result(n_dev);
    for (Execution& e : result) e.outputs.resize(n_out);

    std::vector<int64_t> non_donatable;
    auto opts = PB_PJRT_ARGS(PJRT_ExecuteOptions);
    PB_RETURN_IF_ERROR(execute_options(n_args, options, opts, non_donatable));
    auto exec = PB_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
    exec.executable = loaded_;
    exec.options = &opts;
    exec.argument_lists = argument_lists.data();
    exec.num_devices = n_dev;
    exec.num_args = n_args;
    exec.output_lists = output_lists.data();
    exec.device_complete_events = complete.data();
    const abi::Api& api = client_->plugin().api();
    trace::Scope span("launch", "execute");
    span.arg("executable", name_).arg("devices", static_cast<int64_t>(n_dev));
    if (auto st = [&] {
          trace::Scope call("PJRT_LoadedExecutable_Execute", "plugin");
          return PB_PJRT_CALL(api, PJRT_LoadedExecutable_Execute, exec);
        }();
        !st)
      return std::unexpected(std::move(st).error().annotate("executing " + name_ + " on " + std::to_string(n_dev) + " devices"));
    for (const auto& list : args)
      for (int d : options.donate) list[static_cast<size_t>(d)]->give_up();

    Status adopted = ok();
    for (size_t k = 0; k < n_dev; ++k) {
      result[k].done = Event(client_, complete[k]);
      if (span) result[k].device_span = finish_when_ready(result[k].done, device_span(name_, span.start_ns(), devices_[k]), device_track(*client_, devices_[k]));
      // Every device's outputs get owners, even after one device's are refused: none may leak.
      Status st = adopt_outputs(raw_outputs[k].data(), result[k].outputs, devices_[k], /*dims_from_buffers=*/true);
      if (!st && adopted) adopted = annotate(std::move(st), "device " + std::to_string(devices_[k]));
    }
    if (!adopted) {
      // The execution is running: an error returned now would let the caller release what it uses.
      for (Execution& e : result) finish_span(e.device_span, e.done.await());
      return std::unexpected(std::move(adopted).error());
    }
    return result;
  });
}

Expected<std::vector<Buffer>> Executable::execute(std::span<Buffer* const> args, const ExecuteOptions& options) const noexcept {
  std::vector<Buffer> outputs;
  PB_RETURN_IF_ERROR(execute_into(args, outputs, options));
  return outputs;
}

}  // namespace plugboard
