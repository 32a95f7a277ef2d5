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
//    copied and the program goes on; the receiver's delivery thread (or the thread in await(), which
//    runs what is still queued) calls the function, one call at a time, in the order the plugin made
//    the calls. Every ordered call of an execution has returned before that execution's
//    CallbackExecution::await() does, and before any later blocking call of it runs (those queued
//    then run on the blocking call's thread: the program is waiting anyway).
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

#include "base/dtype.h"
#include "base/status.h"
#include "io/host_array.h"

namespace plugboard {

// A typed view of an array in host memory, valid only during the call it is given to.
struct TensorView {
  DType dtype = DType::kInvalid;
  std::span<const int64_t> dims;
  std::span<const std::byte> bytes;
  std::string shape() const;  // "f32[4]"
};
// A result the host function writes: dtype and dims are the program's.
struct MutableTensorView {
  DType dtype = DType::kInvalid;
  std::span<const int64_t> dims;
  std::span<std::byte> bytes;
  std::string shape() const;
};

// A backend_config attribute: strings, integers, floats and booleans are passed on (arrays and
// nested dictionaries are not).
using AttributeValue = std::variant<std::string, int64_t, double, bool>;
struct CallbackAttribute {
  std::string name;
  AttributeValue value;
};
std::string attribute_to_string(const AttributeValue& v);

// What a blocking host function is given. Valid only during the call.
class BlockingCall {
 public:
  std::string_view name() const { return name_; }
  std::span<const TensorView> operands() const { return operands_; }
  std::span<const MutableTensorView> results() const { return results_; }
  std::span<const CallbackAttribute> attributes() const { return attributes_; }
  const AttributeValue* attribute(std::string_view name) const;

  // Copies `value` into result `index` after checking that its dtype and dims are the program's
  // (INVALID_ARGUMENT naming the callback, the result and both types otherwise).
  Status set_result(size_t index, const TensorView& value) const;
  Status set_result(size_t index, const io::HostArray& value) const;

  BlockingCall(std::string_view name, std::span<const TensorView> operands, std::span<const MutableTensorView> results,
               std::span<const CallbackAttribute> attributes)
      : name_(name), operands_(operands), results_(results), attributes_(attributes) {}

 private:
  std::string_view name_;
  std::span<const TensorView> operands_;
  std::span<const MutableTensorView> results_;
  std::span<const CallbackAttribute> attributes_;
};

// What an ordered host function receives: owned copies, so it may keep them.
struct OrderedCall {
  std::string name;
  uint64_t execution = 0;  // the execution's number within its receiver, from 1
  uint64_t sequence = 0;   // this call's place among the execution's ordered calls, from 0
  std::vector<io::HostArray> operands;
  std::vector<CallbackAttribute> attributes;
  const AttributeValue* attribute(std::string_view name) const;
};

using BlockingFunction = std::function<Status(const BlockingCall&)>;
using OrderedFunction = std::function<Status(const OrderedCall&)>;

enum class CallbackKind { kBlocking, kOrdered };
class OrderedDelivery;

class HostCallbacks {
 public:
  HostCallbacks();
  ~HostCallbacks();  // delivers what is queued, then stops the delivery thread
  HostCallbacks(const HostCallbacks&) = delete;
  HostCallbacks& operator=(const HostCallbacks&) = delete;

  // Binds `name` (a custom-call target: letters, digits, '_', '.', '$', '-') to a function.
  // ALREADY_EXISTS when the name is bound already; FAILED_PRECONDITION once the receiver has been
  // used by an execution (bindings are then fixed, so plugin threads read them without a lock).
  Status add_blocking(std::string name, BlockingFunction fn);
  Status add_ordered(std::string name, OrderedFunction fn);

  std::vector<std::string> names() const;

  struct Entry;
  // For the FFI handler: the entry bound to `name`, or null. Fixes the bindings.
  const Entry* find(std::string_view name) const;
  void freeze() const;
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

// True when `name` can be a custom-call target plugboard registers.
bool valid_callback_name(std::string_view name);

}  // namespace plugboard
