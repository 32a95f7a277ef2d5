// Strict parsing of numbers that users type (flags, environment variables) or files carry.
//
// The whole text must be the number: no sign where none is allowed, no leading or trailing blanks, no
// unit ("5s"), no exponent for integers ("1e3"), and the value must lie in [min, max]. Every error
// names what was being parsed (`what`: "--priority cpu", "PLUGBOARD_ISOLATE_TIMEOUT_MS") and the text.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "base/status.h"

namespace plugboard {

Expected<int64_t> parse_int64(std::string_view text, std::string_view what,
                              int64_t min = std::numeric_limits<int64_t>::min(),
                              int64_t max = std::numeric_limits<int64_t>::max());
Expected<uint64_t> parse_uint64(std::string_view text, std::string_view what,
                                uint64_t max = std::numeric_limits<uint64_t>::max());
// A finite decimal or scientific number ("0.5", "-1e-3"); no "nan", "inf" or hex floats.
Expected<double> parse_double(std::string_view text, std::string_view what);

}  // namespace plugboard
