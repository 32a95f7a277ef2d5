#include "io/float_decode.h"

#include <bit>
#include <cmath>
#include <limits>

namespace plugboard::io {
namespace {

// Value of an IEEE-like binary format with `mbits` mantissa bits and the given exponent bias, for the
// finite encodings only (the callers pick out inf/NaN first). ldexp is exact here: the results are
// far inside double's range and precision.
double finite_value(bool negative, unsigned exponent, unsigned mantissa, int mbits, int bias) {
  const double scale = std::ldexp(1.0, -mbits);
  const double magnitude = exponent == 0
                               ? std::ldexp(mantissa * scale, 1 - bias)  // zero and subnormals
                               : std::ldexp(1.0 + mantissa * scale, static_cast<int>(exponent) - bias);
  return negative ? -magnitude : magnitude;
}

double signed_nan(bool negative) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return negative ? -nan : nan;
}

double signed_inf(bool negative) {
  const double inf = std::numeric_limits<double>::infinity();
  return negative ? -inf : inf;
}

}  // namespace

double decode_f16(uint16_t bits) {
  const bool negative = bits >> 15;
  const unsigned exponent = (bits >> 10) & 0x1F;
  const unsigned mantissa = bits & 0x3FF;
  if (exponent == 0x1F) return mantissa ? signed_nan(negative) : signed_inf(negative);
  return finite_value(negative, exponent, mantissa, 10, 15);
}

double decode_bf16(uint16_t bits) {
  // The f32 with the same value has these bits on top; float -> double keeps the value (and NaN-ness).
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

double decode_f8e5m2(uint8_t bits) {
  const bool negative = bits >> 7;
  const unsigned exponent = (bits >> 2) & 0x1F;
  const unsigned mantissa = bits & 0x3;
  if (exponent == 0x1F) return mantissa ? signed_nan(negative) : signed_inf(negative);
  return finite_value(negative, exponent, mantissa, 2, 15);
}

double decode_f8e4m3fn(uint8_t bits) {
  const bool negative = bits >> 7;
  const unsigned exponent = (bits >> 3) & 0xF;
  const unsigned mantissa = bits & 0x7;
  // The all-ones exponent still holds finite values (256..448); only mantissa 7 there is NaN.
  if (exponent == 0xF && mantissa == 0x7) return signed_nan(negative);
  return finite_value(negative, exponent, mantissa, 3, 7);
}

}  // namespace plugboard::io
