#include "io/array_format.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "io/float_decode.h"

namespace plugboard::io {
namespace {

static_assert(std::endian::native == std::endian::little, "element bytes are read in host order");

// Reads element i as a T; nullopt when the array does not hold that many bytes.
template <class T>
std::optional<T> load(const HostArray& array, size_t i, size_t part = 0) {
  const size_t offset = (i * (dtype_is_complex(array.dtype) ? 2 : 1) + part) * sizeof(T);
  if (i >= array.element_count() || offset + sizeof(T) > array.data.size()) return std::nullopt;
  T value;
  std::memcpy(&value, array.data.data() + offset, sizeof(T));
  return value;
}

template <class T>
double as_double(std::optional<T> v) {
  return v ? static_cast<double>(*v) : std::numeric_limits<double>::quiet_NaN();
}

// Real part (part 0) or imaginary part (part 1) of element i, or the element itself for a real dtype.
double component(const HostArray& a, size_t i, size_t part) {
  switch (a.dtype) {
    case DType::kBool: return as_double(load<uint8_t>(a, i)) != 0 ? 1.0 : 0.0;
    case DType::kI8: return as_double(load<int8_t>(a, i));
    case DType::kI16: return as_double(load<int16_t>(a, i));
    case DType::kI32: return as_double(load<int32_t>(a, i));
    case DType::kI64: return as_double(load<int64_t>(a, i));
    case DType::kU8: return as_double(load<uint8_t>(a, i));
    case DType::kU16: return as_double(load<uint16_t>(a, i));
    case DType::kU32: return as_double(load<uint32_t>(a, i));
    case DType::kU64: return as_double(load<uint64_t>(a, i));
    case DType::kF32: return as_double(load<float>(a, i));
    case DType::kF64: return as_double(load<double>(a, i));
    case DType::kC64: return as_double(load<float>(a, i, part));
    case DType::kC128: return as_double(load<double>(a, i, part));
    default: break;
  }
  const auto decoded = [&](auto bits, auto decode) {
    return bits ? decode(*bits) : std::numeric_limits<double>::quiet_NaN();
  };
  switch (a.dtype) {
    case DType::kF16: return decoded(load<uint16_t>(a, i), decode_f16);
    case DType::kBF16: return decoded(load<uint16_t>(a, i), decode_bf16);
    case DType::kF8E5M2: return decoded(load<uint8_t>(a, i), decode_f8e5m2);
    case DType::kF8E4M3FN: return decoded(load<uint8_t>(a, i), decode_f8e4m3fn);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

// Significant digits that tell every value of a narrow float type apart when printed with %g
// (ceil(p * log10 2) + 1 for p mantissa bits). Integral values are printed whole instead.
int digits_for(DType t) {
  switch (t) {
    case DType::kF8E5M2:
    case DType::kF8E4M3FN: return 3;
    case DType::kBF16: return 4;
    case DType::kF16: return 5;
    default: return 0;  // f32/f64: the shortest round-trip form of the type itself
  }
}

std::string format_float(double v, DType t) {
  if (std::isnan(v)) return "nan";  // sign and payload of a NaN do not matter to plugboard
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::to_chars_result r;
  const int digits = digits_for(t);
  if (digits > 0 && std::trunc(v) == v && std::fabs(v) < 1e15)
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);  // 57344, not 5.73e+04
  else if (digits > 0)
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
  else if (t == DType::kF32 || t == DType::kC64)
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  else
    r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

template <class T>
std::string format_int(std::optional<T> v) {
  return v ? std::to_string(*v) : "?";
}

}  // namespace

double element_as_double(const HostArray& array, size_t i) { return component(array, i, 0); }

std::pair<double, double> complex_element(const HostArray& array, size_t i) {
  if (!dtype_is_complex(array.dtype)) return {component(array, i, 0), 0.0};
  return {component(array, i, 0), component(array, i, 1)};
}

std::string format_element(const HostArray& a, size_t i) {
  if (i >= a.element_count()) return "?";
  switch (a.dtype) {
    case DType::kBool: {
      const auto v = load<uint8_t>(a, i);
      return !v ? "?" : *v ? "true" : "false";
    }
    case DType::kI8: return format_int(load<int8_t>(a, i).transform([](int8_t x) { return int{x}; }));
    case DType::kI16: return format_int(load<int16_t>(a, i));
    case DType::kI32: return format_int(load<int32_t>(a, i));
    case DType::kI64: return format_int(load<int64_t>(a, i));
    case DType::kU8: return format_int(load<uint8_t>(a, i).transform([](uint8_t x) { return unsigned{x}; }));
    case DType::kU16: return format_int(load<uint16_t>(a, i));
    case DType::kU32: return format_int(load<uint32_t>(a, i));
    case DType::kU64: return format_int(load<uint64_t>(a, i));
    case DType::kC64:
    case DType::kC128: {
      const auto [re, im] = complex_element(a, i);
      std::string imag = format_float(im, a.dtype);
      // Python's form: "1+2j", "1-2j"; a sign is added only where the imaginary text has none.
      if (imag.front() != '-') imag.insert(imag.begin(), '+');
      return format_float(re, a.dtype) + imag + "j";
    }
    default:
      if (dtype_is_float(a.dtype)) return format_float(element_as_double(a, i), a.dtype);
      return "?";
  }
}

std::string format_leading_values(const HostArray& array, size_t max_values) {
  const size_t count = array.element_count();
  std::string out = "[";
  for (size_t i = 0; i < count && i < max_values; ++i) {
    if (i > 0) out += ", ";
    out += format_element(array, i);
  }
  if (count > max_values) out += max_values > 0 ? ", ..." : "...";
  return out + "]";
}

}  // namespace plugboard::io
