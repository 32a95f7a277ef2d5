// Host functions that a running program calls back into, by name, through a typed FFI custom call:
//
//   %r = stablehlo.custom_call @scale(%x) {api_version = 4 : i32, backend_config = {factor = 2.0 : f32}}
//        : (tensor<4xf32>) -> tensor<4xf32>
//
// A HostCallbacks value is a receiver: it binds names to host functions for the executions it is
// passed to (see callback/execute.h), so two callers running one compiled program each get their own
// calls. Two kinds:
//  - blocking: the program waits for the function; it reads typed operand views and writes the
//    results, whose dtypes and dims the program fixes;
//  - ordered (non-blocking): for calls without results (print, log, metrics). The operands are
//    copied and the program goes on; the receiver's queue on the shared delivery pool (see
//    ordered_delivery.h; or the thread in await(), which runs what is still queued) calls the
//    function, one call at a time, in the order the plugin made the calls. Every ordered call of an
//    execution has returned before that execution's CallbackExecution::await() returns or its
//    on_complete runs, and before any later blocking call of it runs (those queued then run on the
//    blocking call's thread: the program is waiting anyway).
// XLA may run independent side-effecting calls in any order: thread a !stablehlo.token through them
// (as JAX does for ordered effects) to fix program order. Tokens are not passed to host functions,
// and an ordered call may return one.
// Host functions return a Status; an error (or an exception) fails the execution with its message.
// They run on plugin or delivery threads and must never call back into PJRT (no execute, no
// transfers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "plugboard/host_call.h"

namespace plugboard {

enum class CallbackKind { kBlocking, kOrdered };
class OrderedDelivery;

// Thread-safe: add_* and names() may be called from any thread; once an execution has used the
// receiver its bindings are fixed, and any number of executions (on any threads) may share it.
class HostCallbacks {
 public:
  HostCallbacks();
  // Never waits: queued ordered calls hold their execution, which holds the receiver, so the last
  // owner to let go is a finished task.
  ~HostCallbacks();
  HostCallbacks(const HostCallbacks&) = delete;
  HostCallbacks& operator=(const HostCallbacks&) = delete;

  // Binds `name` (a custom-call target: letters, digits, '_', '.', '$', '-') to a function.
  // ALREADY_EXISTS when the name is bound already; FAILED_PRECONDITION once the receiver has been
  // used by an execution (bindings are then fixed, so plugin threads read them without a lock).
  Status add_blocking(std::string name, BlockingFunction fn);
  Status add_ordered(std::string name, OrderedFunction fn);

  std::vector<std::string> names() const;

  struct Entry;
  // Fixes the bindings (an execution does, before it starts): afterwards add_* fail.
  void freeze() const;
  // For the FFI handler: the entry bound to `name`, or null. Reads the fixed bindings only: null
  // for every name until freeze().
  const Entry* bound_entry(std::string_view name) const;
  OrderedDelivery& delivery() const { return *delivery_; }
  uint64_t next_execution() const;

 private:
  Status add(std::string name, CallbackKind kind, BlockingFunction blocking, OrderedFunction ordered);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<OrderedDelivery> delivery_;
};

struct HostCallbacks::Entry {
  std::string name;
  CallbackKind kind;
  BlockingFunction blocking;
  OrderedFunction ordered;
};


}  // namespace plugboard
