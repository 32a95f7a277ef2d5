#include "conformance/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>

#include "base/dtype.h"
#include "io/array_format.h"

namespace plugboard::conformance {
namespace {

CompareResult fail(std::string reason) { return CompareResult{false, std::move(reason)}; }

std::string shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// "[1,2]" for flat index 5 of dims [2,3]; "[]" for rank 0.
std::string multi_index(size_t flat, const std::vector<int64_t>& dims) {
  std::vector<size_t> index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    const auto extent = static_cast<size_t>(dims[d]);
    index[d] = flat % extent;
    flat /= extent;
  }
  std::string out = "[";
  for (size_t d = 0; d < index.size(); ++d) {
    if (d > 0) out += ",";
    out += std::to_string(index[d]);
  }
  return out + "]";
}

// Rule 4 for one real value. Also feeds the largest finite error seen.
bool float_matches(double a, double e, Tolerance tol, double& max_abs_error) {
  if (std::isnan(e) || std::isnan(a)) return std::isnan(e) && std::isnan(a);
  if (std::isinf(e) || std::isinf(a)) return a == e;
  const double err = std::fabs(a - e);
  max_abs_error = std::max(max_abs_error, err);
  return err <= tol.atol + tol.rtol * std::fabs(e);
}

bool is_integral(DType t) { return !dtype_is_float(t) && !dtype_is_complex(t); }

}  // namespace

CompareResult compare_arrays(const io::HostArray& actual, const io::HostArray& expected, Tolerance tolerance) {
  // Rule 1: the element type and the dimensions must be the expected ones.
  if (actual.dtype != expected.dtype)
    return fail("dtype " + dtype_name(actual.dtype) + " vs expected " + dtype_name(expected.dtype));
  if (actual.dims != expected.dims)
    return fail("shape " + shape_string(actual.dtype, actual.dims) + " vs expected " +
                shape_string(expected.dtype, expected.dims));
  const DType dtype = expected.dtype;
  const std::string shape = shape_string(dtype, expected.dims);
  if (dtype_size(dtype) == 0) return fail("cannot compare arrays of dtype " + dtype_name(dtype));
  if (!element_count(expected.dims)) return fail("invalid shape " + shape);
  const auto check_size = [&](const io::HostArray& a, const char* which) -> std::optional<CompareResult> {
    if (a.data.size() == a.byte_size()) return std::nullopt;
    return fail(std::string(which) + " data is " + std::to_string(a.data.size()) + " bytes, " + shape + " needs " +
                std::to_string(a.byte_size()));
  };
  if (auto bad = check_size(actual, "actual")) return *bad;
  if (auto bad = check_size(expected, "expected")) return *bad;

  // Rule 2: nothing to compare in a zero-size array.
  const size_t count = expected.element_count();
  if (count == 0) return CompareResult{true, ""};

  CompareResult result{true, ""};
  std::optional<size_t> first;
  const size_t itemsize = dtype_size(dtype);
  for (size_t i = 0; i < count; ++i) {
    bool match;
    if (is_integral(dtype)) {
      // Rule 3: bitwise equality.
      match = std::memcmp(actual.data.data() + i * itemsize, expected.data.data() + i * itemsize, itemsize) == 0;
      if (!match) {
        const double err = std::fabs(io::element_as_double(actual, i) - io::element_as_double(expected, i));
        result.max_abs_error = std::max(result.max_abs_error, err);
      }
    } else {
      // Rules 4 and 5 (a real value is a complex one with imaginary part 0 on both sides).
      const auto [are, aim] = io::complex_element(actual, i);
      const auto [ere, eim] = io::complex_element(expected, i);
      const bool re_ok = float_matches(are, ere, tolerance, result.max_abs_error);
      const bool im_ok = float_matches(aim, eim, tolerance, result.max_abs_error);
      match = re_ok && im_ok;
    }
    if (!match) {
      ++result.mismatches;
      if (!first) first = i;
    }
  }
  if (!first) return result;

  result.ok = false;
  const size_t i = *first;
  result.reason = std::to_string(result.mismatches) + " of " + std::to_string(count) + " elements of " + shape +
                  " differ";
  if (!is_integral(dtype))
    result.reason += " (rtol " + shortest(tolerance.rtol) + ", atol " + shortest(tolerance.atol) + ")";
  result.reason += "; first at flat index " + std::to_string(i) + " " + multi_index(i, expected.dims) +
                   ": actual " + io::format_element(actual, i) + ", expected " + io::format_element(expected, i);
  if (dtype_is_float(dtype)) {
    const double a = io::element_as_double(actual, i), e = io::element_as_double(expected, i);
    if (std::isfinite(a) && std::isfinite(e)) result.reason += " (abs error " + shortest(std::fabs(a - e)) + ")";
  }
  return result;
}

}  // namespace plugboard::conformance
