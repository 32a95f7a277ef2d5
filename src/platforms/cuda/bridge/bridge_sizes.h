// The size arithmetic of the CUDA bridge (cuda_bridge.cu), header-only and dependency-free: the bridge
// is compiled by nvcc into its own shared object and links nothing of plugboard, so it cannot call
// base's byte_size(). This is the same checked logic (a negative dimension or an overflowing product
// is refused, never wrapped), kept in a header so that the CPU-only tests check it against
// byte_size() on every dtype and edge case (CudaBridgeSizes.* in tests/callback_trust_test.cpp).
#ifndef PLUGBOARD_CUDA_BRIDGE_SIZES_H_
#define PLUGBOARD_CUDA_BRIDGE_SIZES_H_

#include <xla/ffi/api/c_api.h>

#include <cstddef>
#include <cstdint>

namespace plugboard_cuda {

// Bytes per element of an XLA FFI data type the bridge passes on; 0 for any other (tokens, f4, ...).
inline size_t element_size(int dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_PRED: case XLA_FFI_DataType_S8: case XLA_FFI_DataType_U8:
    case XLA_FFI_DataType_F8E5M2: case XLA_FFI_DataType_F8E4M3FN:
      return 1;
    case XLA_FFI_DataType_S16: case XLA_FFI_DataType_U16: case XLA_FFI_DataType_F16: case XLA_FFI_DataType_BF16:
      return 2;
    case XLA_FFI_DataType_S32: case XLA_FFI_DataType_U32: case XLA_FFI_DataType_F32:
      return 4;
    case XLA_FFI_DataType_S64: case XLA_FFI_DataType_U64: case XLA_FFI_DataType_F64: case XLA_FFI_DataType_C64:
      return 8;
    case XLA_FFI_DataType_C128:
      return 16;
    default:
      return 0;
  }
}

// *out = element * dims[0] * ... * dims[rank-1]. False on a negative rank or dimension, missing dims,
// an unknown element size, or a product past SIZE_MAX. A zero dimension makes 0 whatever the others.
inline bool checked_byte_size(size_t element, int64_t rank, const int64_t* dims, size_t* out) {
  if (element == 0 || rank < 0 || (rank > 0 && !dims)) return false;
  bool empty = false;
  for (int64_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return false;
    if (dims[i] == 0) empty = true;
  }
  if (empty) {
    *out = 0;
    return true;
  }
  size_t n = element;
  for (int64_t i = 0; i < rank; ++i) {
    const auto d = static_cast<size_t>(dims[i]);
    if (n > SIZE_MAX / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

inline constexpr size_t kAlign = 64;

// n rounded up to a multiple of kAlign; only for an n that add_aligned() accepted.
inline size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// *total += round_up(n); false (and *total unchanged) on overflow.
inline bool add_aligned(size_t* total, size_t n) {
  if (n > SIZE_MAX - (kAlign - 1)) return false;
  const size_t rounded = round_up(n);
  if (*total > SIZE_MAX - rounded) return false;
  *total += rounded;
  return true;
}

// The capacity a reused buffer grows to when `wanted` bytes do not fit in `capacity`: at least
// wanted, and at least twice the old capacity (so a slowly growing demand reallocates O(log n)
// times). Never overflows: past SIZE_MAX / 2 it is `wanted` itself.
inline size_t grown_capacity(size_t capacity, size_t wanted) {
  if (wanted <= capacity) return capacity;
  const size_t doubled = capacity <= SIZE_MAX / 2 ? capacity * 2 : wanted;
  return doubled > wanted ? doubled : wanted;
}

}  // namespace plugboard_cuda

#endif  // PLUGBOARD_CUDA_BRIDGE_SIZES_H_
