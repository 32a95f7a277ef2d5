/// \file
/// Element types as plugboard names them, independent of any PJRT header.
///
/// The enumerator values are PJRT_Buffer_Type's, so the ABI layer converts with a cast; the names are the
/// conformance suite's ("f32", "bf16", "f8e5m2", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plugboard/status.h"

namespace plugboard {

/// An array's element type: PJRT_Buffer_Type's values, the conformance suite's names (dtype_name()).
enum class DType : int {
  kInvalid = 0,
  kBool = 1,  ///< PRED
  kI8 = 2,
  kI16 = 3,
  kI32 = 4,
  kI64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kC64 = 14,
  kC128 = 15,
  kF8E5M2 = 16,
  kF8E4M3FN = 17,
};

/// "f32", "bf16", ...; "invalid" for kInvalid, "dtype(n)" for a value plugboard does not know.
std::string dtype_name(DType t);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes per element; 0 for kInvalid or an unknown value.
size_t dtype_size(DType t);
bool dtype_is_float(DType t);  ///< f16, bf16, f8*, f32, f64
bool dtype_is_complex(DType t);  ///< c64, c128
/// Every dtype plugboard handles, in enum order.
const std::vector<DType>& all_dtypes();

/// Number of elements of an array with these dimensions (1 for rank 0). nullopt on a negative
/// dimension or overflow of size_t.
std::optional<size_t> element_count(std::span<const int64_t> dims);

/// Bytes of an array of this dtype and these dimensions: the one checked product used everywhere
/// (buffers, .npy files, callback operands, the CUDA bridge). INVALID_ARGUMENT naming the dimension on a
/// negative one or an unknown dtype, OUT_OF_RANGE when the count or the byte size overflows size_t.
Expected<size_t> byte_size(DType t, std::span<const int64_t> dims);

/// "f32[4,8]"
std::string shape_string(DType t, const std::vector<int64_t>& dims);

}  // namespace plugboard
