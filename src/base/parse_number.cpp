#include "base/parse_number.h"

#include <charconv>
#include <cmath>
#include <string>

namespace plugboard {
namespace {

std::unexpected<Error> not_a_number(std::string_view text, std::string_view what, std::string_view kind) {
  return invalid_argument(std::string(what) + ": '" + std::string(text) + "' is not " + std::string(kind));
}

template <class T>
Expected<T> parse_integer(std::string_view text, std::string_view what, T min, T max, std::string_view kind) {
  T value{};
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  // from_chars accepts a leading '-' for signed types only and never '+' or blanks: exactly the
  // strictness wanted, once the whole text is required to be consumed.
  const auto [ptr, ec] = std::from_chars(begin, end, value, 10);
  if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return not_a_number(text, what, kind);
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    return make_error(Code::kOutOfRange, std::string(what) + ": " + std::string(text) + " is out of range [" +
                                             std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

}  // namespace

Expected<int64_t> parse_int64(std::string_view text, std::string_view what, int64_t min, int64_t max) {
  return parse_integer<int64_t>(text, what, min, max, "an integer");
}

Expected<uint64_t> parse_uint64(std::string_view text, std::string_view what, uint64_t max) {
  return parse_integer<uint64_t>(text, what, 0, max, "a non-negative integer");
}

Expected<double> parse_double(std::string_view text, std::string_view what) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::general);
  if (text.empty() || ptr != end || ec == std::errc::invalid_argument) return not_a_number(text, what, "a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(value)) {
    return make_error(Code::kOutOfRange, std::string(what) + ": " + std::string(text) + " is out of the range of a double");
  }
  return value;
}

}  // namespace plugboard
