// A compiled program on a client (an owned PJRT_LoadedExecutable) and its signature: the parameter
// and result array types, so that a wrong argument is refused before the plugin sees it.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/dims.h"
#include "base/dtype.h"
#include "base/status.h"
#include "runtime/buffer.h"
#include "runtime/event.h"
#include "runtime/pjrt_handles.h"
#include "runtime/traced_event.h"

extern "C" {
struct PJRT_ExecuteOptions;  // filled by Executable's launches (pjrt_c_api.h)
}

namespace plugboard {

class Client;
class Executable;
struct Description;
namespace abi {
class Api;
}
struct CompileOptions;
class Program;
namespace internal {
Status describe(const abi::Api& api, Executable& exe, const std::string& doing);
Expected<std::shared_ptr<Executable>> adopt_loaded(std::shared_ptr<const Client> client, PJRT_LoadedExecutable* loaded,
                                                   bool portable, const std::string& doing, const Description* known);
}

struct ArrayType {
  DType dtype = DType::kInvalid;
  Dims dims;
  std::string to_string() const;
  bool operator==(const ArrayType&) const = default;
};

struct Signature {
  // False when the plugin could not tell the parameter types (no OptimizedProgram): then only
  // what the plugin itself checks is checked.
  bool parameters_known = false;
  std::vector<ArrayType> parameters;
  // As compiled: a bounded dynamic dimension (tensor<?xf32, #stablehlo.bounds<8>>) shows its bound. The
  // outputs of an execution carry the dims their buffers have (see execute_async).
  std::vector<ArrayType> results;
  // Per result, whether the optimized program marks a dimension of it dynamic; empty when the plugin
  // could not tell. Only such results (or all, when empty) have their dims read from their buffers:
  // the others are the compiled dims, which spares two PJRT calls per output on the execute path.
  std::vector<bool> results_dynamic;
  // Every custom-call target the optimized program calls (each name once, in the order first seen);
  // nullopt when the plugin could not tell (no OptimizedProgram).
  std::optional<std::vector<std::string>> custom_call_targets;
};

// What an executable's loader learns by asking the plugin (name and signature): stored beside a
// serialized executable, it spares the asking (PJRT_Executable_OptimizedProgram twice and an HLO parse)
// when the executable is loaded again.
struct Description {
  std::string name;
  Signature signature;
};

struct ExecuteOptions {
  // Indices of the arguments the caller gives up to the execution: the plugin may reuse their memory
  // for outputs (where the program allows it), and the Buffer objects become invalid. Every other
  // argument is passed as non-donatable and stays valid. In execute_partitioned, the indices hold
  // for every device's argument list.
  std::vector<int> donate;
  // Index (into client().devices()) of the device to run on. 0 runs where the program was compiled
  // for (the first device); another one needs a program compiled with CompileOptions::portable, and
  // every argument on that device. execute_partitioned takes 0 only (the devices are the program's).
  int device = 0;
  // Per-execution data for the plugin's FFI handlers (host callbacks attach theirs here); not owned,
  // and must outlive the execution. Null: none.
  PJRT_ExecuteContext* context = nullptr;
};

// The outputs of an execution that may still be running, and the event that says it finished.
struct Execution {
  std::vector<Buffer> outputs;
  Event done;
  // Its span on the device's track while a trace records (else null): whoever hands `done`'s outcome
  // on ends it first (finish_span), so that the span is in a trace stopped once the outcome arrived.
  std::shared_ptr<SpanUntilReady> device_span;
};

class Executable : public std::enable_shared_from_this<Executable> {
 public:
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  const std::string& name() const { return name_; }
  const Signature& signature() const { return signature_; }
  Description description() const { return {name_, signature_}; }
  size_t num_outputs() const { return signature_.results.size(); }
  const std::shared_ptr<const Client>& client() const { return client_; }

  // Runs on options.device (the client's first device by default) and waits for it to finish. Thread-safe: several threads may
  // execute one executable at once. Arguments must be valid buffers of this client whose dtype and
  // dims match the signature; a mismatch is an INVALID_ARGUMENT naming the argument.
  Expected<std::vector<Buffer>> execute(std::span<Buffer* const> args, const ExecuteOptions& options = {}) const noexcept;
  // The same, returning as soon as the plugin has enqueued the work. Each output's dims are its
  // buffer's (PJRT_Buffer_Dimensions): for an output with a dynamic dimension, the size this execution
  // gave it (PJRT_Buffer_UnpaddedDimensions), which waits until that output is computed.
  Expected<Execution> execute_async(std::span<Buffer* const> args, const ExecuteOptions& options = {}) const noexcept;
  // execute() into caller-owned storage: `outputs` is resized to num_outputs() and its Buffers take
  // this execution's outputs (the ones they held are released first). Reused across calls, it makes
  // the execute path allocate nothing and touch no reference count: the loop to use at the speed of
  // the raw C API. A refused or failed call leaves `outputs` as it was (its buffers may be the call's
  // arguments); only outputs the plugin returned malformed leave it empty.
  Status execute_into(std::span<Buffer* const> args, std::vector<Buffer>& outputs,
                      const ExecuteOptions& options = {}) const noexcept;

  // The devices (indices into client()->devices()) the program was compiled for, in the plugin's
  // order, which is partition by partition within replica by replica (XLA's executables list them
  // so): one for a program compiled for one device, num_replicas * num_partitions for an SPMD
  // program, none for a portable one (it runs where it is told).
  const std::vector<int>& devices() const { return devices_; }
  // Runs a program compiled for several devices (CompileOptions::num_partitions, num_replicas) on all
  // of them at once: args[k] are the arguments for devices()[k], each on that device and of the
  // signature's types (an SPMD program's parameters are one device's part of each array). Returns
  // one Execution per device, in the same order, with that device's outputs (dims as the buffers
  // have them) and its own completion event. A wrong list count, argument or device is an
  // INVALID_ARGUMENT naming the device and argument; host-callback contexts are not supported here.
  Expected<std::vector<Execution>> execute_partitioned(std::span<const std::vector<Buffer*>> args,
                                                       const ExecuteOptions& options = {}) const noexcept;

  // The executable as bytes the same plugin build can load again (Client::load_serialized):
  // PJRT_Executable_Serialize. UNIMPLEMENTED (the plugin's error) where the plugin cannot.
  Expected<std::string> serialize() const noexcept;
  // Whether it was compiled portable (no device assignment).
  bool portable() const { return portable_; }

  PJRT_LoadedExecutable* raw() const { return loaded_; }

 private:
  friend Expected<std::shared_ptr<Executable>> internal::adopt_loaded(std::shared_ptr<const Client>, PJRT_LoadedExecutable*,
                                                                     bool, const std::string&, const Description*);
  friend Status internal::describe(const abi::Api&, Executable&, const std::string&);
  Executable() = default;
  Status check_args(std::span<Buffer* const> args, const ExecuteOptions& options) const;
  // Checks one list of arguments for `device` (types, client, device, donation); `which` prefixes messages.
  Status check_list(std::span<Buffer* const> args, const ExecuteOptions& options, int device) const;
  // The PJRT_ExecuteOptions of a launch: the context (the client's empty one where the plugin needs
  // one and none is given) and the non-donatable indices (`scratch` holds them when some are donated).
  Status execute_options(size_t num_args, const ExecuteOptions& options, PJRT_ExecuteOptions& opts,
                         std::vector<int64_t>& scratch) const;
  // Asks the plugin which devices a non-portable executable runs on (devices_).
  Status query_devices(const std::string& doing);
  // PJRT_LoadedExecutable_Execute of checked arguments; `out_list` (num_outputs() slots) receives the
  // outputs, `complete` the event. A plugin that needs an execute context and is given none gets the
  // client's shared empty one.
  Status launch(std::span<Buffer* const> args, const ExecuteOptions& options, PJRT_Buffer** out_list,
                PJRT_Event** complete) const;
  // Gives the launched outputs owners (`outputs`, num_outputs() of them) and their dims: the
  // signature's where it says they are static, unless `dims_from_buffers`, else the buffers'.
  Status adopt_outputs(PJRT_Buffer* const* out_list, std::span<Buffer> outputs, int device,
                       bool dims_from_buffers = false) const;

  std::shared_ptr<const Client> client_;
  PJRT_LoadedExecutable* loaded_ = nullptr;
  std::string name_;
  Signature signature_;
  std::vector<int64_t> all_arg_indices_;  // 0..n-1: the non-donatable list when nothing is donated
  bool portable_ = false;                  // compiled without a device assignment: always run on a named device
  std::vector<int> devices_;               // see devices()
};

}  // namespace plugboard
