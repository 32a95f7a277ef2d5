// Exact decoders from the narrow float formats to double.
//
// Every f16, bf16, f8e5m2 and f8e4m3fn value is exactly representable as a double, so these lose
// nothing; NaN keeps its sign bit (its payload is not preserved).
#pragma once

#include <cstdint>

namespace plugboard::io {

double decode_f16(uint16_t bits);       // IEEE binary16
double decode_bf16(uint16_t bits);      // upper 16 bits of a binary32
double decode_f8e5m2(uint8_t bits);     // s EEEEE MM, bias 15, IEEE-like (has inf)
double decode_f8e4m3fn(uint8_t bits);   // s EEEE MMM, bias 7, no inf, NaN only at 0x7F/0xFF

}  // namespace plugboard::io
