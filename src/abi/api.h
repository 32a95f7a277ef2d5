// The one place that touches the PJRT C API directly.
//
// Every call into a plugin goes through PB_PJRT_CALL, which
//   1. checks that this plugin's PJRT_Api is large enough to hold the function (older plugins have a
//      shorter table; reading past its end would be reading someone else's memory) and that the slot
//      is not null,
//   2. calls it with an argument struct that was zeroed and given its struct_size (PB_PJRT_ARGS),
//   3. turns a returned PJRT_Error into an Error value carrying the plugin's code and message and the
//      function's name, and destroys the PJRT_Error.
// The header is the oldest one the project is built against (PJRT 0.81): newer plugins accept its
// smaller argument structs.
#pragma once

#include <pjrt_c_api.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include "base/dtype.h"
#include "base/status.h"

namespace plugboard::abi {

// A plugin's function table plus the label (its path) that error messages name.
class Api {
 public:
  Api() = default;
  Api(const PJRT_Api* raw, std::string label) : raw_(raw), label_(std::move(label)) {}

  const PJRT_Api* raw() const { return raw_; }
  const std::string& label() const { return label_; }
  size_t struct_size() const { return raw_ ? raw_->struct_size : 0; }

  // True when the table holds a non-null function at `offset` (offsetof(PJRT_Api, fn)).
  bool covers(size_t offset) const {
    if (!raw_ || raw_->struct_size < offset + sizeof(void*)) return false;
    void* slot;
    std::memcpy(&slot, reinterpret_cast<const char*>(raw_) + offset, sizeof(slot));
    return slot != nullptr;
  }

  // Converts and destroys a PJRT_Error returned by `function`. Never returns an OK error.
  Error take_error(PJRT_Error* error, std::string_view function) const;

  // The error for a function this plugin's table does not reach.
  Error missing_function(std::string_view function, size_t offset) const;

 private:
  const PJRT_Api* raw_ = nullptr;
  std::string label_;
};

// A zeroed argument struct with struct_size set to the size this header knows.
template <class Args>
Args zeroed_args(size_t struct_size) {
  Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = struct_size;
  return args;
}

// Reads an enum field a plugin wrote as a plain int: a newer plugin may write values this header's
// enum does not list (new extension or buffer types), and loading those as the enum type is undefined.
template <class Enum>
int enum_value(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v;
  std::memcpy(&v, &field, sizeof(v));
  return v;
}

template <class Fn>
Fn* function_at(const PJRT_Api* raw, size_t offset) {
  Fn* fn;
  std::memcpy(&fn, reinterpret_cast<const char*>(raw) + offset, sizeof(fn));
  return fn;
}

// Calls a PJRT function of the PJRT_Error*(Args*) shape, guarded as described above.
template <class Fn, class Args>
Status guarded_call(const Api& api, size_t offset, std::string_view name, Args* args) {
  if (!api.covers(offset)) return std::unexpected(api.missing_function(name, offset));
  PJRT_Error* error = function_at<Fn>(api.raw(), offset)(args);
  if (error) return std::unexpected(api.take_error(error, name));
  return {};
}

// PJRT_Buffer_Type and plugboard's DType share their numbering for every type plugboard knows.
inline PJRT_Buffer_Type to_pjrt(DType t) { return static_cast<PJRT_Buffer_Type>(static_cast<int>(t)); }
inline DType from_pjrt(int v) {
  return (v >= 1 && v <= static_cast<int>(DType::kF8E4M3FN)) ? static_cast<DType>(v) : DType::kInvalid;
}
// The PJRT name of a buffer type ("F32", "F8E4M3B11FNUZ", ...) for messages about types plugboard
// does not handle.
std::string pjrt_type_name(int t);

inline std::string_view view(const char* data, size_t size) {
  return data ? std::string_view(data, size) : std::string_view();
}

}  // namespace plugboard::abi

// Zeroed args of type T with T's struct_size from the header.
#define PB_PJRT_ARGS(T) ::plugboard::abi::zeroed_args<T>(T##_STRUCT_SIZE)

// Guarded call of PJRT function `fn` (e.g. PJRT_Client_Create) through `api` with `args` (an lvalue).
#define PB_PJRT_CALL(api, fn, args) \
  ::plugboard::abi::guarded_call<fn>((api), offsetof(PJRT_Api, fn), #fn, &(args))

// Whether `api` reaches function `fn`.
#define PB_PJRT_HAS(api, fn) ((api).covers(offsetof(PJRT_Api, fn)))
