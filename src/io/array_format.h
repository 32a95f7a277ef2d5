// Element access and short human-readable renderings of host arrays, for messages and tools.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "io/host_array.h"

namespace plugboard::io {

// Element i (flat, row-major) as a double: floats decoded exactly (bf16/f16/f8 too), integers converted
// (i64/u64 beyond 2^53 round), bool as 0/1, complex as its real part. NaN when i is out of range or the
// dtype is unknown.
double element_as_double(const HostArray& array, size_t i);

// Element i as (real, imaginary); a non-complex element has imaginary part 0.
std::pair<double, double> complex_element(const HostArray& array, size_t i);

// Element i as text: "2.5", "nan", "-inf", "-0" for floats (with as many digits as the type needs to
// be told apart from its neighbours), "42" for integers (exact), "true"/"false", "1+2j", "1-0.5j".
std::string format_element(const HostArray& array, size_t i);

// The first max_values elements: "[1, 2.5, nan, -inf, ...]" ("..." when there are more), "[]" when
// there are none.
std::string format_leading_values(const HostArray& array, size_t max_values = 8);

}  // namespace plugboard::io
