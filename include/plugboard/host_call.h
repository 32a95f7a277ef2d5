/// \file
/// What a host function is given when a running program calls back into the host: typed views of its
/// operands and results (blocking calls), owned copies (ordered calls), and the custom call's
/// backend_config attributes. Public (the facade, plugboard.h, hands these to host functions) and used
/// as they are inside the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "plugboard/dtype.h"
#include "plugboard/host_array.h"
#include "plugboard/status.h"

namespace plugboard {

/// A typed view of an array in host memory, valid only during the call it is given to.
struct TensorView {
  DType dtype = DType::kInvalid;  ///< the element type
  std::span<const int64_t> dims;  ///< row-major dimensions; empty for rank 0
  std::span<const std::byte> bytes;  ///< the elements, little-endian, row-major
  std::string shape() const;  ///< "f32[4]"
};
/// A result the host function writes: dtype and dims are the program's.
struct MutableTensorView {
  DType dtype = DType::kInvalid;  ///< the element type the program expects
  std::span<const int64_t> dims;  ///< the dimensions the program expects
  std::span<std::byte> bytes;  ///< where the result goes: exactly its byte size
  std::string shape() const;  ///< "f32[4]"
};

/// A backend_config attribute: strings, integers, floats and booleans are passed on (arrays and
/// nested dictionaries are not).
using AttributeValue = std::variant<std::string, int64_t, double, bool>;
/// One attribute of a custom call's backend_config.
struct CallbackAttribute {
  std::string name;  ///< the attribute's key
  AttributeValue value;  ///< its value
};
/// The value as text: a string as is, numbers and booleans printed.
std::string attribute_to_string(const AttributeValue& v);

/// What a blocking host function is given. Valid only during the call.
class BlockingCall {
 public:
  /// The custom-call target the program called.
  std::string_view name() const { return name_; }
  /// The call's operands, in order (the token excluded).
  std::span<const TensorView> operands() const { return operands_; }
  /// The call's results, to be written (set_result() checks the type); in order.
  std::span<const MutableTensorView> results() const { return results_; }
  /// The custom call's backend_config attributes.
  std::span<const CallbackAttribute> attributes() const { return attributes_; }
  /// The attribute named `name`, or null.
  const AttributeValue* attribute(std::string_view name) const;

  /// Copies `value` into result `index` after checking that its dtype and dims are the program's
  /// (INVALID_ARGUMENT naming the callback, the result and both types otherwise).
  Status set_result(size_t index, const TensorView& value) const;
  /// The same from an owned array.
  Status set_result(size_t index, const io::HostArray& value) const;

  /// A call over views that live as long as the call (the library makes these).
  BlockingCall(std::string_view name, std::span<const TensorView> operands, std::span<const MutableTensorView> results,
               std::span<const CallbackAttribute> attributes)
      : name_(name), operands_(operands), results_(results), attributes_(attributes) {}

 private:
  std::string_view name_;
  std::span<const TensorView> operands_;
  std::span<const MutableTensorView> results_;
  std::span<const CallbackAttribute> attributes_;
};

/// What an ordered host function receives: owned copies, so it may keep them.
struct OrderedCall {
  std::string name;  ///< the custom-call target the program called
  uint64_t execution = 0;  ///< the execution's number within its receiver, from 1
  uint64_t sequence = 0;  ///< this call's place among the execution's ordered calls, from 0
  std::vector<io::HostArray> operands;  ///< the call's operands, in order (the token excluded)
  std::vector<CallbackAttribute> attributes;  ///< the custom call's backend_config attributes
  /// The attribute named `name`, or null.
  const AttributeValue* attribute(std::string_view name) const;
};

/// A blocking host function: runs on the plugin's thread while the program waits for its results;
/// an error fails the execution.
using BlockingFunction = std::function<Status(const BlockingCall&)>;
/// An ordered host function: runs on a delivery thread, one call at a time per receiver, in program
/// order; the program does not wait for it. An error is the execution's await() result.
using OrderedFunction = std::function<Status(const OrderedCall&)>;

/// True when `name` can be a custom-call target plugboard registers.
bool valid_callback_name(std::string_view name);

}  // namespace plugboard
