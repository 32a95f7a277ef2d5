/// \file
/// An array in host memory: element type, dimensions and the raw little-endian element bytes.
///
/// This is what .npy files decode to and what goes to (and comes back from) a device buffer, so the
/// bytes are kept exactly as stored: bf16 and f8 elements stay raw bit patterns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plugboard/dtype.h"
#include "plugboard/status.h"

namespace plugboard::io {

/// An array in host memory: what a .npy file holds, what a buffer copies to and from, what an
/// ordered host call receives.
struct HostArray {
  DType dtype = DType::kInvalid;  ///< the element type
  std::vector<int64_t> dims;  ///< row-major; empty for rank 0
  std::vector<std::byte> data;  ///< element_count() * dtype_size(dtype) bytes when well formed

  /// Product of dims (1 for rank 0); 0 when a dimension is negative or the product overflows.
  size_t element_count() const { return plugboard::element_count(dims).value_or(0); }
  /// Bytes the dims and dtype call for (not data.size(), which a malformed array may disagree with), by
  /// the one checked product: an error for a negative dimension, an unknown dtype or an overflow.
  Expected<size_t> checked_byte_size() const { return plugboard::byte_size(dtype, dims); }
  /// The same as a plain number; SIZE_MAX when checked_byte_size() fails, so that it never equals the
  /// size of any data a malformed array holds.
  size_t byte_size() const { return checked_byte_size().value_or(SIZE_MAX); }
};

}  // namespace plugboard::io
