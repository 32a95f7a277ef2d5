// Comparing an output a plugin produced with the stored expected output, by the rules of
// conformance/README.md, "Comparing outputs".
#pragma once

#include <cstddef>
#include <string>

#include "io/host_array.h"

namespace plugboard::conformance {

// A floating-point element passes when |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double rtol = 0, atol = 0;
};

struct CompareResult {
  bool ok;
  std::string reason;        // empty when ok; otherwise what differs, for a person to read
  size_t mismatches = 0;     // elements that fail (a complex element counts once)
  double max_abs_error = 0;  // largest |actual - expected| over elements where both are finite
};

// Rules 1-7: dtype and dims must match; a zero-size array then passes; integers and bool must be
// bitwise equal; floats (bf16, f16 and f8 decoded exactly) are compared in f64 with NaN matching only
// NaN, an infinity only itself, and the tolerance for the rest; complex parts are compared separately.
// An array whose data size disagrees with its dtype and dims fails with a reason saying so.
CompareResult compare_arrays(const io::HostArray& actual, const io::HostArray& expected, Tolerance tolerance);

}  // namespace plugboard::conformance
